package sandboxtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentnode/agentnode/sdk/sandbox"
)

// workspaceFixture is the host directory the workspace checks grant
// (Spec.Workspace): Dir holds data.txt (Token, mode 0666) and exe (an
// executable copy of the probe); Dir is mode 0777, so that only the mount
// stands in the way of writing it. Its parent also holds outside.txt,
// which the sandbox must not see.
type workspaceFixture struct {
	dir, token string
	outside    string
}

// newWorkspaceFixture makes the workspace fixture beside nothing else of
// the suite's.
func newWorkspaceFixture(tb testing.TB, probe string) (*workspaceFixture, error) {
	parent := tb.TempDir()
	w := &workspaceFixture{dir: filepath.Join(parent, "workspace"), token: "sandboxtest-workspace-" + randomHex(8),
		outside: filepath.Join(parent, "outside.txt")}
	if err := os.Mkdir(w.dir, 0o777); err != nil {
		return nil, fmt.Errorf("sandboxtest: workspace: %w", err)
	}
	// Resolved, as the host hands it to backends (t.TempDir may be under
	// a symlink).
	dir, err := filepath.EvalSymlinks(w.dir)
	if err != nil {
		return nil, fmt.Errorf("sandboxtest: workspace: %w", err)
	}
	w.dir, w.outside = dir, filepath.Join(filepath.Dir(dir), "outside.txt")
	data := filepath.Join(w.dir, "data.txt")
	for _, err := range []error{
		os.Chmod(w.dir, 0o777),
		os.WriteFile(data, []byte(w.token), 0o666),
		os.Chmod(data, 0o666),
		copyFile(probe, filepath.Join(w.dir, "exe"), 0o755),
		os.Chmod(filepath.Join(w.dir, "exe"), 0o755),
		os.WriteFile(w.outside, []byte("sandboxtest-outside-"+randomHex(8)), 0o644),
	} {
		if err != nil {
			return nil, fmt.Errorf("sandboxtest: workspace: %w", err)
		}
	}
	return w, nil
}

// names lists the workspace's entries.
func (w *workspaceFixture) names() ([]string, error) {
	ents, err := os.ReadDir(w.dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out, nil
}

// unchanged checks on the host that a run left the workspace as it was.
func (w *workspaceFixture) unchanged() error {
	b, err := os.ReadFile(filepath.Join(w.dir, "data.txt"))
	if err != nil || string(b) != w.token {
		return fmt.Errorf("the workspace's data.txt changed: %q, %v", b, err)
	}
	names, err := w.names()
	if err != nil || !slices.Equal(names, []string{"data.txt", "exe"}) {
		return fmt.Errorf("the workspace holds %v (%v), want [data.txt exe]", names, err)
	}
	return nil
}

// workspaceCheck is a probe check run with the workspace granted
// (read-only unless writable); the run must leave the workspace as it was.
func workspaceCheck(name, what string, writable bool, args func(h *harness) []string) check {
	return check{name: name, what: what, run: func(ctx context.Context, h *harness) outcome {
		if (writable && h.cfg.WorkspaceWriteRefused) || h.cfg.WorkspaceRefused {
			return checkWorkspaceRefused(ctx, h, name, nil, writable)
		}
		o := judge(name, h.exec(ctx, name, runOpts{args: append([]string{name, h.ws.dir}, args(h)...),
			workspace: &sandbox.Workspace{Path: h.ws.dir, Writable: writable}}), false)
		if err := h.ws.unchanged(); o.ok && err != nil {
			return fail("probe: %s, but %v", o.detail, err)
		}
		return o
	}}
}

// workspaceChecks are the checks of a run given a host directory
// (Spec.Workspace, `--workspace`).
var workspaceChecks = []check{
	workspaceCheck("workspace-cwd", "with a workspace the process's working directory is the workspace, at its host path, and a relative path reads the file there", false,
		func(h *harness) []string { return []string{h.ws.token} }),
	workspaceCheck("workspace-readonly", "a read-only workspace is readable and mounted ro: writing, creating, renaming, chmod in it fail with EROFS (its files are writable by all on the host)", false,
		func(h *harness) []string { return []string{h.ws.token} }),
	workspaceCheck("workspace-noexec", "a workspace is mounted nosuid, nodev, noexec: an executable in it cannot be run (EACCES)", false,
		func(*harness) []string { return nil }),
	workspaceCheck("workspace-confined", "with a workspace nothing beside it on the host is visible: not a file next to it, by path or through ..", false,
		func(*harness) []string { return nil }),
	{name: "workspace-writable", what: "a writable workspace (its working directory) is mounted rw, nosuid, nodev, noexec and what the process writes there appears on the host; a backend that cannot (Config.WorkspaceWriteRefused) refuses the run", run: checkWorkspaceWritable},
	workspaceCheck("workspace-writable-noexec", "a writable workspace stays noexec: neither the executable in it nor one the process writes there can be run", true,
		func(*harness) []string { return nil }),
}

func checkWorkspaceWritable(ctx context.Context, h *harness) outcome {
	const name = "workspace-writable"
	out := fmt.Sprintf("written-%d-%d.txt", os.Getpid(), h.runs.Load()+1)
	token := "sandboxtest-written-" + randomHex(8)
	host := filepath.Join(h.ws.dir, out)
	defer os.Remove(host)
	if h.cfg.WorkspaceWriteRefused || h.cfg.WorkspaceRefused {
		return checkWorkspaceRefused(ctx, h, name, []string{out, token}, true)
	}
	o := judge(name, h.exec(ctx, name, runOpts{args: []string{name, h.ws.dir, out, token},
		workspace: &sandbox.Workspace{Path: h.ws.dir, Writable: true}}), false)
	if !o.ok {
		return o
	}
	b, err := os.ReadFile(host)
	if err != nil || string(b) != token {
		return fail("probe: %s, but on the host %s holds %q (%v), want %q", o.detail, host, b, err, token)
	}
	os.Remove(host)
	if err := h.ws.unchanged(); err != nil {
		return fail("probe: %s, but %v", o.detail, err)
	}
	return pass("%s; the file appeared on the host", o.detail)
}

// checkWorkspaceRefused: the backend declares it cannot make a writable
// workspace (Config.WorkspaceWriteRefused), or any workspace
// (Config.WorkspaceRefused), safe, so the run must be refused: an error,
// no probe output, nothing written, nothing left.
func checkWorkspaceRefused(ctx context.Context, h *harness, name string, args []string, writable bool) outcome {
	r := h.exec(ctx, name, runOpts{args: append([]string{name, h.ws.dir}, args...),
		workspace: &sandbox.Workspace{Path: h.ws.dir, Writable: writable}})
	switch {
	case r.err == nil:
		return fail("the backend declares it refuses this workspace (Config.WorkspaceWriteRefused or WorkspaceRefused), but ran it: %s", r.describe())
	case r.stdout.total > 0:
		return fail("the refused run printed output: %s", r.describe())
	case len(r.leftovers)+len(r.traces) > 0:
		return fail("the refused run left things behind: %s", r.describe())
	}
	if err := h.ws.unchanged(); err != nil {
		return fail("the run was refused (%v), but %v", r.err, err)
	}
	return pass("refused, as the backend declares (Config.WorkspaceWriteRefused or WorkspaceRefused): %v", r.err)
}
