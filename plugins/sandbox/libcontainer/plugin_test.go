package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

var (
	pluginOnce sync.Once
	pluginDir  string
	pluginBin  string
	pluginErr  error
)

// buildPlugin builds this package like `make build` does, once per test
// binary (TestMain removes it).
func buildPlugin(t testing.TB) string {
	t.Helper()
	pluginOnce.Do(func() {
		pluginDir, pluginErr = os.MkdirTemp("", "agentnode-libcontainer-bin-")
		if pluginErr != nil {
			return
		}
		pluginBin = filepath.Join(pluginDir, "agentnode-sandbox-libcontainer")
		cmd := exec.Command(goTool(), "build", "-trimpath", "-ldflags", "-s -w", "-tags", "seccomp", "-o", pluginBin, ".")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			pluginErr = fmt.Errorf("building the plugin: %w\n%s", err, out.String())
		}
	})
	if pluginErr != nil {
		t.Fatal(pluginErr)
	}
	return pluginBin
}

// TestPluginBinary launches the built binary the way agentnode does
// (go-plugin, gRPC only, SHA-256 pinned) and runs the stdin → stdout round
// trip through it. The same binary is the container init, so this also
// proves the re-exec wiring of a real build.
func TestPluginBinary(t *testing.T) {
	_, fx := setup(t)
	// The binary, launched as agentnode launches it, takes no configuration:
	// it runs in the default state root and cgroup parent. Its runs have ids
	// unique to this process and every check below looks only at them.
	b := newBackend(nil)
	c := sandboxtest.LaunchPlugin(t, buildPlugin(t))
	inf, err := c.Info(t.Context())
	if err != nil || inf.Name != "libcontainer" || inf.Kind != plugin.KindSandbox {
		t.Fatalf("Info = %+v, %v", inf, err)
	}
	av, err := c.Availability(t.Context(), &sandbox.AvailabilityRequest{Image: fx.Image, ImageStore: fx.Store})
	if err != nil || !av.Available {
		t.Fatalf("Availability = %+v, %v", av, err)
	}

	id := newID(t, b, "bin")
	var stdout, stderr bytes.Buffer
	resp, err := c.Run(t.Context(), &sandbox.RunRequest{
		Spec:   spec(fx, id, "sh", "-c", "cat; id -u"),
		Stdin:  strings.NewReader("through the binary\n"),
		Stdout: &stdout, Stderr: &stderr,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if resp.ExitCode != 0 || stdout.String() != "through the binary\n1000\n" || !resp.CleanupVerified {
		t.Fatalf("resp %+v stdout %q stderr %q", resp, stdout.String(), stderr.String())
	}
	assertNoLeftovers(t, b, fx, id)

	// A timeout through the binary: killed, and cleanup proven.
	id = newID(t, b, "bin")
	s := spec(fx, id, "sleep", "1000")
	s.Timeout = 300 * time.Millisecond
	resp, err = c.Run(t.Context(), &sandbox.RunRequest{Spec: s})
	if err != nil || !resp.TimedOut || !resp.CleanupVerified {
		t.Fatalf("timeout run: %+v, %v", resp, err)
	}
	assertNoLeftovers(t, b, fx, id)
}

// TestInitByHand: "init" without libcontainer's pipes fails fast and never
// reaches plugin code (no handshake line on stdout).
func TestInitByHand(t *testing.T) {
	bin := buildPlugin(t)
	cmd := exec.Command(bin, "init")
	cmd.Env = append(os.Environ(), plugin.Handshake.MagicCookieKey+"="+plugin.Handshake.MagicCookieValue)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err := cmd.Run()
	if err == nil {
		t.Fatal("init by hand succeeded")
	}
	if stdout.Len() != 0 {
		t.Fatalf("init by hand wrote to stdout: %q", stdout.String())
	}
}

// TestConformanceBinary runs the conformance and escape suite through the
// built plugin binary.
func TestConformanceBinary(t *testing.T) {
	_, fx := setup(t)
	sandboxtest.Run(t, sandboxtest.LaunchPlugin(t, buildPlugin(t)), suiteConfig(fx))
}
