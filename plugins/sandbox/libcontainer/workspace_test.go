package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agentnode/agentnode/sdk/sandbox"
)

// rootfsListing lists every path of the rootfs with its mode, size and
// modification time: what a run may not change.
func rootfsListing(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %v %d %d", strings.TrimPrefix(p, root), fi.Mode(), fi.Size(), fi.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// wsOwner owns the test workspace.
const wsOwner = 4242

// workspaceDir makes a workspace in a directory the image does not have
// (/var is not in the fixture's rootfs), so the mount point's whole chain
// must be made somewhere: never in the image.
func workspaceDir(t *testing.T) string {
	t.Helper()
	if err := os.MkdirAll("/var/tmp", 0o1777); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "agentnode-ws-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ws := filepath.Join(dir, "project")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	// A user owns it, as their own directory: not the sandbox user's id
	// (1000), which inside is neither that user nor root; the idmapped
	// workspace mount makes the owner the sandbox user.
	if err := os.Chown(ws, wsOwner, wsOwner); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The owner's alone (0600): the sandbox reads it as the owner.
	csv := filepath.Join(ws, "in.csv")
	if err := os.WriteFile(csv, []byte("a,b\n1,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(csv, wsOwner, wsOwner); err != nil {
		t.Fatal(err)
	}
	return ws
}

// TestWorkspace: the workspace is at its own path and is the working
// directory; read-only unless writable; nothing in it executes; a file
// written appears on the host as the workspace owner's; the verified image is
// not changed by making the mount point, and nothing of the run's root is
// left.
func TestWorkspace(t *testing.T) {
	b, fx := setup(t)
	ws := workspaceDir(t)
	before := rootfsListing(t, fx.Rootfs)

	// Read-only.
	id := newID(t, b, "ws-ro")
	s := spec(fx, id, "sh", "-c", `pwd; cat in.csv; echo x > out.txt && echo wrote; echo x > /pwned && echo wrote-root`)
	s.Workspace = &sandbox.Workspace{Path: ws}
	resp, out, errOut := run(t, b, s, nil)
	if want := ws + "\na,b\n1,2\n"; out != want {
		t.Fatalf("read-only workspace: stdout %q, want %q (stderr %q)", out, want, errOut)
	}
	if !strings.Contains(strings.ToLower(errOut), "read-only") || resp.ExitCode == 0 {
		t.Errorf("write into a read-only workspace: exit %d stderr %q", resp.ExitCode, errOut)
	}
	if _, err := os.Lstat(filepath.Join(ws, "out.txt")); err == nil {
		t.Error("a read-only workspace got a file on the host")
	}
	assertNoLeftovers(t, b, fx, id)

	// Read-write; a copied executable cannot run (noexec), nor setuid help.
	id = newID(t, b, "ws-rw")
	s = spec(fx, id, "sh", "-c", `echo result > out.txt && echo wrote; cp /bin/busybox ./bb && chmod 4755 ./bb; ./bb echo executed; ls -l out.txt`)
	s.Workspace = &sandbox.Workspace{Path: ws, Writable: true}
	resp, out, errOut = run(t, b, s, nil)
	if !strings.Contains(out, "wrote") || strings.Contains(out, "executed") || !resp.CleanupVerified {
		t.Fatalf("read-write workspace: exit %d stdout %q stderr %q", resp.ExitCode, out, errOut)
	}
	if !strings.Contains(strings.ToLower(errOut), "permission denied") {
		t.Errorf("executing from the workspace: stderr %q, want permission denied", errOut)
	}
	data, err := os.ReadFile(filepath.Join(ws, "out.txt"))
	if err != nil || string(data) != "result\n" {
		t.Fatalf("the written file on the host: %q, %v", data, err)
	}
	// The owner's on the host, not a subordinate id.
	assertOwner(t, filepath.Join(ws, "out.txt"), wsOwner)
	assertNoLeftovers(t, b, fx, id)

	if after := rootfsListing(t, fx.Rootfs); !slices.Equal(before, after) {
		t.Errorf("the image's rootfs changed:\nbefore %d entries\nafter %d entries", len(before), len(after))
	}
	if entries, err := os.ReadDir(b.rootsDir()); err != nil || len(entries) != 0 {
		t.Errorf("workspace roots left behind: %v (%v)", entries, err)
	}

	// A run without a workspace does not see it.
	id = newID(t, b, "ws-none")
	resp, out, errOut = run(t, b, spec(fx, id, "sh", "-c", "cat "+ws+"/in.csv || echo absent"), nil)
	if out != "absent\n" {
		t.Errorf("a run without a workspace: exit %d stdout %q stderr %q", resp.ExitCode, out, errOut)
	}
	assertNoLeftovers(t, b, fx, id)
}

// TestReapOrphanRoots: a workspace root whose owner is gone is removed; a
// live owner's is kept.
func TestReapOrphanRoots(t *testing.T) {
	b, fx := setup(t)
	ws := workspaceDir(t)
	dead := newID(t, b, "ws-orphan")
	r, err := b.makeRunRoot(dead, fx.Rootfs, ws)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, "owner"), []byte("1:1"), 0o600); err != nil { // pid 1 started at tick 1: not alive as such
		t.Fatal(err)
	}
	live := newID(t, b, "ws-live")
	lr, err := b.makeRunRoot(live, fx.Rootfs, ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lr.remove() })
	if err := b.reapOrphanRoots(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(r.dir); err == nil {
		t.Error("the orphaned root is still there")
	}
	if _, err := os.Lstat(filepath.Join(lr.merged, ws)); err != nil {
		t.Errorf("the live run's root was touched: %v", err)
	}
	if err := lr.remove(); err != nil {
		t.Fatal(err)
	}
}

func assertOwner(t *testing.T, p string, uid uint32) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid {
		t.Errorf("%s is owned by uid %d, want %d", p, st.Uid, uid)
	}
}
