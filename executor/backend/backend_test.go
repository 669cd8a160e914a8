package backend

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/executor/confine"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/python"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// TestSandboxArgs: every command form becomes its argv in the container,
// whose package is at /pack.
func TestSandboxArgs(t *testing.T) {
	for _, c := range []struct {
		cmd  Command
		want []string
	}{
		{Command{Exec: &Exec{Entrypoint: "bin/tool"}}, []string{"/pack/bin/tool"}},
		{Command{Exec: &Exec{Entrypoint: "server.js", Args: []string{"--stdio"}, Interpreter: "node", HostInterpreter: "/usr/bin/node"}},
			[]string{"node", "/pack/server.js", "--stdio"}},
		{Command{Python: &Python{Entrypoint: "pkg.mod:run"}},
			python.ImageCommand("/pack", "pkg.mod:run", false)},
		{Command{Container: []string{"/pack/bin/agent"}}, []string{"/pack/bin/agent"}},
	} {
		got, err := sandboxArgs(c.cmd)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%+v: %q %v, want %q", c.cmd, got, err, c.want)
		}
	}
	if _, err := sandboxArgs(Command{}); !errors.Is(err, reason.ErrRuntimeUnsupported) {
		t.Errorf("no command: %v", err)
	}
}

// TestFor: the placement picks the backend (a sandbox one with the client
// and image the kernel put in the plan); a sandbox placement without a
// checked backend client, or an unknown placement, runs nothing.
func TestFor(t *testing.T) {
	if b, err := For(&plan.Plan{Placement: plan.PlacementHost}); err != nil || b != (Host{}) {
		t.Fatalf("host: %T %v", b, err)
	}
	if _, err := For(&plan.Plan{Placement: plan.PlacementSandbox, BackendName: "libcontainer"}); !errors.Is(err, reason.ErrSandboxUnavailable) ||
		!strings.Contains(err.Error(), "no sandbox backend was placed") {
		t.Fatalf("sandbox without client: %v", err)
	}
	sb, img := &sandbox.Client{}, plan.Image{Ref: "img@sha256:0", Store: "/s", ConfigDigest: "sha256:1"}
	b, err := For(&plan.Plan{Placement: plan.PlacementSandbox, BackendName: "libcontainer", Sandbox: sb, Image: img})
	if s, ok := b.(*Sandbox); err != nil || !ok || s.Name != "libcontainer" || s.Client != sb || s.Image != img {
		t.Fatalf("sandbox: %#v %v", b, err)
	}
	if _, err := For(&plan.Plan{Placement: plan.PlacementNone}); !errors.Is(err, reason.ErrSandboxUnavailable) ||
		!strings.Contains(err.Error(), `placement "none" cannot execute`) {
		t.Fatalf("none: %v", err)
	}
}

// hostPackage writes an executable script into a package directory.
func hostPackage(t *testing.T, script string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "tool"), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func hostTask(dir string) *Task {
	return &Task{PackageDir: dir, Command: Command{Exec: &Exec{Entrypoint: "bin/tool"}},
		Env: []string{"PATH=/usr/bin:/bin"}, HostConfinement: confine.ModeBestEffort, Timeout: time.Minute,
		MaxStdout: 1 << 10, MaxStderr: 1 << 10}
}

// TestHostRun: the host backend runs an exec command, confined, and
// reports how it ended: its output and exit code, a verified cleanup, a
// stdout past the limit, a timeout, and a refusal of sealed egress.
func TestHostRun(t *testing.T) {
	ctx := context.Background()
	task := hostTask(hostPackage(t, "read line; echo \"got $line\"; echo oops >&2; exit 3\n"))
	task.Stdin = []byte("hello\n")
	exit, err := Host{}.Run(ctx, task)
	if err != nil || exit.ExitCode != 3 || string(exit.Stdout) != "got hello\n" || string(exit.Stderr) != "oops\n" ||
		!exit.CleanupVerified || exit.RunErr != nil || exit.TimedOut || exit.StdoutExceeded {
		t.Fatalf("run: %+v %v", exit, err)
	}

	exit, err = Host{}.Run(ctx, hostTask(hostPackage(t, "head -c 4096 /dev/zero\n")))
	if err != nil || !exit.StdoutExceeded || len(exit.Stdout) > 1<<10 {
		t.Fatalf("flood: %+v %v", exit, err)
	}

	task = hostTask(hostPackage(t, "exec sleep 60\n"))
	task.Timeout = 100 * time.Millisecond
	exit, err = Host{}.Run(ctx, task)
	if err != nil || !exit.TimedOut || !exit.CleanupVerified {
		t.Fatalf("timeout: %+v %v", exit, err)
	}

	task = hostTask(hostPackage(t, "exit 0\n"))
	task.EgressSocket = "/tmp/x.sock"
	if exit, err := (Host{}).Run(ctx, task); exit != nil || !errors.Is(err, reason.ErrEgressDenied) {
		t.Fatalf("egress on the host: %+v %v", exit, err)
	}

	task = hostTask(hostPackage(t, "exit 0\n"))
	task.Command = Command{Container: []string{"/pack/bin/tool"}}
	if exit, err := (Host{}).Run(ctx, task); exit != nil || !errors.Is(err, reason.ErrRuntimeUnsupported) {
		t.Fatalf("container command on the host: %+v %v", exit, err)
	}
}

// TestHostRunStreams: a streaming task (an MCP server, an agent) reads
// its stdin and writes its stdout as it runs.
func TestHostRunStreams(t *testing.T) {
	task := hostTask(hostPackage(t, "while read line; do echo \"echo $line\"; done\n"))
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	task.StdinStream, task.StdoutStream = inR, outW
	type ran struct {
		exit *Exit
		err  error
	}
	done := make(chan ran, 1)
	go func() {
		exit, err := Host{}.Run(context.Background(), task)
		_ = outW.Close()
		done <- ran{exit, err}
	}()
	r := bufio.NewReader(outR)
	for _, msg := range []string{"one", "two"} {
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil || line != "echo "+msg+"\n" {
			t.Fatalf("reply %q %v", line, err)
		}
	}
	_ = inW.Close()
	res := <-done
	if res.err != nil || res.exit.ExitCode != 0 || !res.exit.CleanupVerified || len(res.exit.Stdout) != 0 {
		t.Fatalf("end: %+v %v", res.exit, res.err)
	}
}

// TestOOMKilledRunIsKilledMemory: a sandboxed run the OOM killer ended is
// killed_memory (exit 1), naming the limit; other kills are not, and a run
// that still exited 0 keeps its outcome.
func TestOOMKilledRunIsKilledMemory(t *testing.T) {
	lim := sandbox.Limits{MemoryBytes: 64 << 20}
	err := OOMError(true, 137, "tool a/b", lim)
	if !errors.Is(err, reason.ErrKilledMemory) || reason.CodeOf(err).ExitCode() != reason.ExitFailed ||
		!strings.Contains(err.Error(), "64 MiB") {
		t.Fatalf("err = %v", err)
	}
	for _, resp := range []*sandbox.RunResponse{
		{ExitCode: 137, Killed: true},
		{ExitCode: 0, OOMKilled: true},
		{ExitCode: 1},
	} {
		if err := OOMError(resp.OOMKilled, resp.ExitCode, "tool a/b", lim); err != nil {
			t.Errorf("%+v: %v", resp, err)
		}
	}
}
