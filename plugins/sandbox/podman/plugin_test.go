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
func buildPlugin(t *testing.T) string {
	t.Helper()
	pluginOnce.Do(func() {
		pluginDir, pluginErr = os.MkdirTemp("", "agentnode-podman-bin-")
		if pluginErr != nil {
			return
		}
		pluginBin = filepath.Join(pluginDir, "agentnode-sandbox-podman")
		cmd := exec.Command(goTool(), "build", "-trimpath", "-ldflags", "-s -w", "-o", pluginBin, ".")
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
// (go-plugin, gRPC only, SHA-256 pinned, and no environment of the host
// reaching the plugin matters: it gives podman its own) and runs a round
// trip and a timeout through it.
func TestPluginBinary(t *testing.T) {
	_, fx := setup(t)
	c := sandboxtest.LaunchPlugin(t, buildPlugin(t))
	inf, err := c.Info(t.Context())
	if err != nil || inf.Name != "podman" || inf.Kind != plugin.KindSandbox {
		t.Fatalf("Info = %+v, %v", inf, err)
	}
	av, err := c.Availability(t.Context(), &sandbox.AvailabilityRequest{Image: fx.Img.Ref})
	if err != nil || !av.Available {
		t.Fatalf("Availability = %+v, %v", av, err)
	}

	id := newID(t, "bin")
	var stdout, stderr bytes.Buffer
	resp, err := c.Run(t.Context(), &sandbox.RunRequest{
		Spec:   spec(fx, id, "sh", "-c", "cat; id -u; echo oops >&2; exit 5"),
		Stdin:  strings.NewReader("through the binary\n"),
		Stdout: &stdout, Stderr: &stderr,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if resp.ExitCode != 5 || stdout.String() != "through the binary\n1000\n" || stderr.String() != "oops\n" || !resp.CleanupVerified {
		t.Fatalf("resp %+v stdout %q stderr %q", resp, stdout.String(), stderr.String())
	}
	assertGone(t, nil, id) // the binary runs in the default places, shared

	// A timeout through the binary: killed, and cleanup proven.
	id = newID(t, "bin")
	s := spec(fx, id, "sleep", "1000")
	s.Timeout = 300 * time.Millisecond
	resp, err = c.Run(t.Context(), &sandbox.RunRequest{Spec: s})
	if err != nil || !resp.TimedOut || !resp.Killed || !resp.CleanupVerified {
		t.Fatalf("timeout run: %+v, %v", resp, err)
	}
	assertGone(t, nil, id)
}

// TestByHand: run without the handshake cookie the binary refuses, writes
// nothing to stdout and starts no podman.
func TestByHand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildPlugin(t)
	cmd := exec.Command(bin)
	cmd.Env = []string{}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("run by hand succeeded")
	}
	if stdout.Len() != 0 {
		t.Fatalf("wrote to stdout: %q", stdout.String())
	}
	if !strings.Contains(stderr.String(), "agentnode plugin") {
		t.Errorf("stderr %q", stderr.String())
	}
}

// TestConformanceBinary runs the conformance and escape suite through the
// built plugin binary.
func TestConformanceBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the whole suite")
	}
	_, fx := setup(t)
	sandboxtest.Run(t, sandboxtest.LaunchPlugin(t, buildPlugin(t)), suiteConfig(fx))
}
