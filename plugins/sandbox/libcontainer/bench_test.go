package main

// Start-up cost, side by side, of a hardened trivial tool (busybox true):
//
//	BenchmarkLibcontainerTrivial  this backend's Run, in-process
//	BenchmarkRuncRun              `runc run` of a bundle whose config.json is
//	                              the same profile.ForRun spec
//	BenchmarkOSExec               a bare os/exec of the same binary
//	BenchmarkSideBySide           the three interleaved in one loop, with
//	                              ns/op of each and the ratios as metrics
//	BenchmarkUserNamespace        this backend's Run with its user namespace
//	                              (and the run's own root it needs) and
//	                              without, interleaved: ns/op of each, the
//	                              difference and the ratio
//	BenchmarkRootless             (rootless_test.go) the same run by root with
//	                              the user namespace and by a created normal
//	                              user with a delegated subtree (rootless),
//	                              side by side: ns/op, rootless-ns/op, ratio
//	BenchmarkPluginBinaryTrivial  for reference: the same run through the
//	                              built plugin binary over go-plugin gRPC, as
//	                              the host sees it (the container init is then
//	                              the smaller plugin binary, not the test binary)
//
// Goals: libcontainer ≤ 0.5× runc run; the user namespace adds ≤ 3 ms.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

var benchSeq atomic.Int64

// benchLC returns a func that runs busybox true through the backend.
func benchLC(b *testing.B) func() { return benchLCWith(b, false) }

// benchLCWith is benchLC, without the user namespace if noUserNS.
func benchLCWith(b *testing.B, noUserNS bool) func() {
	be, fx := setup(b)
	be.noUserNS = noUserNS
	prefix := fmt.Sprintf("bench-%d", os.Getpid())
	b.Cleanup(func() { sweep(be, prefix) })
	return func() {
		id := fmt.Sprintf("%s-%d", prefix, benchSeq.Add(1))
		resp, err := be.Run(b.Context(), &sandbox.RunRequest{Spec: spec(fx, id, "true")})
		if err != nil {
			b.Fatal(err)
		}
		if resp.ExitCode != 0 || !resp.CleanupVerified {
			b.Fatalf("resp %+v", resp)
		}
	}
}

// sweep destroys anything a failed benchmark left under prefix.
func sweep(be *backend, prefix string) {
	entries, _ := os.ReadDir(be.stateRoot)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			forceCleanup(be, e.Name())
		}
	}
}

func runcPath() string {
	for _, p := range []string{"/usr/sbin/runc", "/usr/bin/runc"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, _ := exec.LookPath("runc")
	return p
}

// benchRunc returns a func that runs the equivalent bundle with `runc run`.
func benchRunc(b *testing.B) func() {
	be, fx := setup(b)
	runc := runcPath()
	if runc == "" {
		skipOrFail(b, "runc is not installed")
	}
	dir := b.TempDir()
	root := filepath.Join(dir, "state") // runc's --root
	bundle := filepath.Join(dir, "bundle")
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		b.Fatal(err)
	}
	prefix := fmt.Sprintf("runcbench-%d", os.Getpid())
	s, err := profile.ForRun(spec(fx, prefix, "true"))
	if err != nil {
		b.Fatal(err)
	}
	// What the backend does to the spec, done to the bundle: the same
	// absolute cgroup path and rlimits within the host's hard limits.
	s.Linux.CgroupsPath = be.cgroupParent + "/" + prefix
	rl, err := convertRlimits(s.Process.Rlimits)
	if err != nil {
		b.Fatal(err)
	}
	for i := range s.Process.Rlimits {
		s.Process.Rlimits[i].Hard, s.Process.Rlimits[i].Soft = rl[i].Hard, rl[i].Soft
	}
	data, err := json.Marshal(s)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o600); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = exec.Command(runc, "--root", root, "delete", "--force", prefix).Run()
		for _, p := range cgroupDirsOf(be, prefix) {
			_ = os.Remove(p)
		}
	})
	return func() {
		id := fmt.Sprintf("%s-%d", prefix, benchSeq.Add(1))
		cmd := exec.Command(runc, "--root", root, "run", "--bundle", bundle, id)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("runc run: %v\n%s", err, out)
		}
	}
}

// benchExec returns a func that runs the same busybox true with os/exec.
func benchExec(b *testing.B) func() {
	_, fx := setup(b)
	bin := filepath.Join(fx.Rootfs, "bin", "true")
	return func() {
		if err := exec.Command(bin).Run(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLibcontainerTrivial(b *testing.B) {
	f := benchLC(b)
	for b.Loop() {
		f()
	}
}

// BenchmarkUserNamespace interleaves runs with and without the user
// namespace and reports the cost it adds.
func BenchmarkUserNamespace(b *testing.B) {
	fns := []func(){benchLCWith(b, false), benchLCWith(b, true)}
	var total [2]time.Duration
	n := 0
	for b.Loop() {
		for i, f := range fns {
			start := time.Now()
			f()
			total[i] += time.Since(start)
		}
		n++
	}
	per := func(i int) float64 { return float64(total[i].Nanoseconds()) / float64(n) }
	b.ReportMetric(per(0), "userns-ns/op")
	b.ReportMetric(per(1), "no-userns-ns/op")
	b.ReportMetric((per(0)-per(1))/1e6, "added-ms")
	b.ReportMetric(per(0)/per(1), "userns/no-userns")
}

func BenchmarkPluginBinaryTrivial(b *testing.B) {
	be, fx := setup(b)
	c := sandboxtest.LaunchPlugin(b, buildPlugin(b))
	prefix := fmt.Sprintf("benchbin-%d", os.Getpid())
	b.Cleanup(func() { sweep(be, prefix) })
	for b.Loop() {
		id := fmt.Sprintf("%s-%d", prefix, benchSeq.Add(1))
		resp, err := c.Run(b.Context(), &sandbox.RunRequest{Spec: spec(fx, id, "true")})
		if err != nil {
			b.Fatal(err)
		}
		if resp.ExitCode != 0 || !resp.CleanupVerified {
			b.Fatalf("resp %+v", resp)
		}
	}
}

func BenchmarkRuncRun(b *testing.B) {
	f := benchRunc(b)
	for b.Loop() {
		f()
	}
}

func BenchmarkOSExec(b *testing.B) {
	f := benchExec(b)
	for b.Loop() {
		f()
	}
}

// BenchmarkSideBySide interleaves the three so that both cores' load
// affects them alike, and reports each one's ns/op and the ratios.
func BenchmarkSideBySide(b *testing.B) {
	fns := []func(){benchLC(b), benchRunc(b), benchExec(b)}
	var total [3]time.Duration
	n := 0
	for b.Loop() {
		for i, f := range fns {
			start := time.Now()
			f()
			total[i] += time.Since(start)
		}
		n++
	}
	per := func(i int) float64 { return float64(total[i].Nanoseconds()) / float64(n) }
	b.ReportMetric(per(0), "libcontainer-ns/op")
	b.ReportMetric(per(1), "runc-run-ns/op")
	b.ReportMetric(per(2), "os-exec-ns/op")
	b.ReportMetric(per(0)/per(1), "libcontainer/runc")
	b.ReportMetric(per(0)/per(2), "libcontainer/os-exec")
}
