package cgdelegate_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/cgroups"

	"github.com/agentnode/agentnode/sdk/sandbox/cgdelegate"
	"github.com/agentnode/agentnode/sdk/testuser"
)

const requireEnv = "AGENTNODE_REQUIRE_LIBCONTAINER"

func skipOrFail(t *testing.T) func(string, ...any) {
	return func(format string, args ...any) {
		t.Helper()
		if os.Getenv(requireEnv) == "1" {
			t.Fatalf(format+" (and "+requireEnv+"=1)", args...)
		}
		t.Skipf(format, args...)
	}
}

// TestDelegateV1 delegates a subtree to a real new user, then proves from
// the user's side what it may and may not do: create a child cgroup, set a
// memory limit on it and move its own process in; never write the limits
// of its subtree's root or of the hierarchy's root.
func TestDelegateV1(t *testing.T) {
	if cgroups.IsCgroup2UnifiedMode() {
		t.Skip("cgroup v2: delegation is systemd's")
	}
	u := testuser.Create(t, skipOrFail(t))
	if _, err := cgdelegate.Check(u.UID); !errors.Is(err, cgdelegate.ErrNotDelegated) {
		t.Fatalf("Check before Delegate = %v, want ErrNotDelegated", err)
	}
	dirs, err := cgdelegate.Delegate(u.UID, u.GID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cgdelegate.Undelegate(u.UID); err != nil {
			t.Errorf("Undelegate: %v", err)
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("%s left behind", d)
			}
		}
	})
	if again, err := cgdelegate.Delegate(u.UID, u.GID); err != nil || strings.Join(again, ",") != strings.Join(dirs, ",") {
		t.Fatalf("Delegate again = %v, %v; want %v (idempotent)", again, err, dirs)
	}
	parent, err := cgdelegate.Check(u.UID)
	if err != nil || parent != cgdelegate.Parent(u.UID) {
		t.Fatalf("Check = %q, %v", parent, err)
	}
	mounts, err := cgdelegate.Mounts()
	if err != nil {
		t.Fatal(err)
	}
	mem := filepath.Join(mounts["memory"], cgdelegate.Parent(u.UID))
	child := filepath.Join(mem, "run1")
	// As the user: mkdir a child, limit it, join it, read the membership.
	script := `set -e
mkdir "$1"
echo 67108864 > "$1/memory.limit_in_bytes"
echo $$ > "$1/cgroup.procs"
cat /proc/self/cgroup
`
	out, err := u.Command(nil, "/bin/sh", "-c", script, "sh", child).CombinedOutput()
	if err != nil {
		t.Fatalf("as %s: %v: %s", u, err, out)
	}
	if want := "memory:" + cgdelegate.Parent(u.UID) + "/run1"; !strings.Contains(string(out), want) {
		t.Fatalf("user's shell not in %s:\n%s", want, out)
	}
	if lim, _ := os.ReadFile(filepath.Join(child, "memory.limit_in_bytes")); strings.TrimSpace(string(lim)) != "67108864" {
		t.Fatalf("child limit = %q", lim)
	}
	// The attacker's side: the subtree's own limits and the root's are not
	// the user's to write, and neither is another user's subtree's parent.
	for _, f := range []string{filepath.Join(mem, "memory.limit_in_bytes"), filepath.Join(mounts["memory"], "memory.limit_in_bytes"),
		filepath.Join(mounts["pids"], cgdelegate.Parent(u.UID), "pids.max"), filepath.Join(mounts["memory"], cgdelegate.Root, "cgroup.procs")} {
		if out, err := u.Command(nil, "/bin/sh", "-c", `echo 1 > "$1"`, "sh", f).CombinedOutput(); err == nil {
			t.Errorf("user %s wrote %s: %s", u, f, out)
		}
	}
	if out, err := u.Command(nil, "/bin/mkdir", filepath.Join(mounts["memory"], cgdelegate.Root, "x"+strconv.Itoa(u.UID))).CombinedOutput(); err == nil {
		t.Errorf("user created a cgroup beside its subtree: %s", out)
	}
}
