package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentnode/agentnode/cmd/agentnode/mcpserve"
	"github.com/agentnode/agentnode/cmd/agentnode/pkginstall"
	"github.com/agentnode/agentnode/kernel/dispatch"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/pluginhost"
)

// catalogManifest is a small exec toolpack with two tools.
func catalogManifest(id string) string {
	return `manifest_version: "0.2"
package_id: ` + id + `
package_type: toolpack
name: Bench
publisher: bench
version: 1.0.0
summary: A package of the catalogue benchmark
runtime: exec
capabilities:
  tools:
    - {name: echo, description: Echo, entrypoint: bin/tool, input_schema: {type: object, properties: {text: {type: string}}}}
    - {name: ping, description: Ping, entrypoint: bin/tool, input_schema: {properties: {n: {type: integer}}}}
permissions:
  network: {level: none}
  filesystem: {level: none}
  code_execution: {level: none}
`
}

// catalogHome returns a private AGENTNODE_HOME with n packages installed
// through pkginstall, the code `agentnode install` uses, and sets
// AGENTNODE_HOME to it.
func catalogHome(tb testing.TB, n int) string {
	tb.Helper()
	dir := tb.TempDir()
	tb.Setenv("AGENTNODE_HOME", dir)
	tb.Setenv("AGENTNODE_CONFIG", "")
	src := tb.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "bin"), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "bin", "tool"), []byte("#!/bin/sh\necho '{\"ok\":true,\"result\":1}'\n"), 0o755); err != nil {
		tb.Fatal(err)
	}
	inst := pkginstall.Open(home.PackagesDir(dir))
	for i := range n {
		if err := os.WriteFile(filepath.Join(src, "agentnode.yaml"), []byte(catalogManifest(fmt.Sprintf("pkg-%05d", i))), 0o644); err != nil {
			tb.Fatal(err)
		}
		if _, err := inst.Install(src, nil); err != nil {
			tb.Fatalf("install %d: %v", i, err)
		}
	}
	return dir
}

// catalogSession serves homeDir over an in-memory transport (no plugins,
// no polling) and returns the client session.
func catalogSession(tb testing.TB, homeDir string) *mcp.ClientSession {
	tb.Helper()
	srv := mcpserve.New(mcpserve.Options{
		Kernel: dispatch.Kernel{HomeDir: homeDir},
		NewPlugins: func() *pluginhost.Host {
			return pluginhost.New(pluginhost.Options{HomeDir: homeDir, BinDir: tb.TempDir()})
		},
		Version:      "bench",
		PollInterval: -1,
	})
	tb.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	st, ct := mcp.NewInMemoryTransports()
	go func() { _ = srv.Run(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cs.Close() })
	return cs
}

// listAllTools is one full tools/list (every page); it returns the count.
func listAllTools(tb testing.TB, cs *mcp.ClientSession) int {
	n := 0
	for _, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			tb.Fatal(err)
		}
		n++
	}
	return n
}

// BenchmarkCatalog times the catalogue operations side by side at 200 and
// 1,000 installed packages: `list`, `mcp status` and a full tools/list of
// `mcp serve`. Besides the time, each reports the CPU time the process
// spent per operation (cpu-ms/op, user and system, all threads), which
// other work on a shared machine inflates less than the time.
func BenchmarkCatalog(b *testing.B) {
	for _, n := range []int{200, 1000} {
		b.Run(fmt.Sprintf("packages=%d", n), func(b *testing.B) {
			homeDir := catalogHome(b, n)
			for _, op := range []string{"list", "mcp-status"} {
				args := strings.Split(strings.Replace(op, "-", " ", 1), " ")
				b.Run(op, func(b *testing.B) {
					runCLIBench(args...) // the first listing records the verdicts; time the ones after
					cpu := processCPU(b)
					for b.Loop() {
						if code, _, errOut := runCLIBench(args...); code != 0 {
							b.Fatalf("%v: exit %d: %s", args, code, errOut)
						}
					}
					reportCPU(b, cpu)
				})
			}
			b.Run("tools-list", func(b *testing.B) {
				cs := catalogSession(b, homeDir)
				listAllTools(b, cs)
				cpu := processCPU(b)
				for b.Loop() {
					if got := listAllTools(b, cs); got != 2*n {
						b.Fatalf("tools/list: %d tools, want %d", got, 2*n)
					}
				}
				reportCPU(b, cpu)
			})
		})
	}
}

func runCLIBench(args ...string) (int, string, string) {
	var out, errOut strings.Builder
	code := execute(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// processCPU is the CPU time (user and system) this process has spent.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time spent since since, per operation.
func reportCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64(processCPU(b)-since)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
