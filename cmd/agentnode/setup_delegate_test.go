package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/opencontainers/cgroups"

	"github.com/agentnode/agentnode/sdk/sandbox/cgdelegate"
	"github.com/agentnode/agentnode/sdk/testuser"
)

// asUserEnv makes this test binary, re-executed as a created user, run the
// agentnode command line in its arguments after "--" (TestAsUserHelper).
const asUserEnv = "AGENTNODE_TEST_AS_USER_CLI"

// TestAsUserHelper is no test: re-executed as a created user (asUserEnv)
// it runs the command line after "--" and exits with its code.
func TestAsUserHelper(t *testing.T) {
	if os.Getenv(asUserEnv) != "1" {
		t.Skip("helper for the tests that run agentnode as a normal user")
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(execute(args, strings.NewReader(""), os.Stdout, os.Stderr))
}

func requireSkip(t *testing.T) func(string, ...any) {
	return func(format string, args ...any) {
		t.Helper()
		if os.Getenv("AGENTNODE_REQUIRE_LIBCONTAINER") == "1" {
			t.Fatalf(format+" (and AGENTNODE_REQUIRE_LIBCONTAINER=1)", args...)
		}
		t.Skipf(format, args...)
	}
}

// TestSetupDelegate: root delegates a subtree to a created user (by name,
// then again by uid: idempotent); the subtree is the user's in every
// controller; the user itself cannot delegate and is told the command.
func TestSetupDelegate(t *testing.T) {
	if cgroups.IsCgroup2UnifiedMode() {
		t.Skip("cgroup v2: delegation is systemd's")
	}
	u := testuser.Create(t, requireSkip(t))
	t.Cleanup(func() {
		if err := cgdelegate.Undelegate(u.UID); err != nil {
			t.Errorf("Undelegate: %v", err)
		}
	})

	// As the user first: plain setup says what is missing and the command
	// that gives it; setup --delegate is refused, naming that command.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := u.Executable(t, exe)
	home := []string{asUserEnv + "=1", "AGENTNODE_HOME=" + filepath.Join(u.Home, ".agentnode")}
	out, err := u.Command(home, bin, "-test.run=^TestAsUserHelper$", "--", "setup").CombinedOutput()
	if err != nil || !strings.Contains(string(out), cgdelegate.FixCommand(u.Name)) {
		t.Fatalf("setup as %s: %v\n%s\nwant a note naming %q", u, err, out, cgdelegate.FixCommand(u.Name))
	}
	c := u.Command(home, bin, "-test.run=^TestAsUserHelper$", "--", "setup", "--delegate", u.Name)
	out, err = c.CombinedOutput()
	if err == nil || !strings.Contains(string(out), cgdelegate.FixCommand(u.Name)) {
		t.Fatalf("setup --delegate as %s: %v\n%s\nwant a refusal naming %q", u, err, out, cgdelegate.FixCommand(u.Name))
	}
	if _, err := cgdelegate.Check(u.UID); err == nil {
		t.Fatal("the user's own setup --delegate delegated something")
	}

	for _, who := range []string{u.Name, strconv.Itoa(u.UID)} {
		code, stdout, stderr := runCLI(t, "setup", "--delegate", who, "--json")
		if code != 0 {
			t.Fatalf("setup --delegate %s: exit %d: %s %s", who, code, stdout, stderr)
		}
		var res delegateResult
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("%v: %s", err, stdout)
		}
		if res.UID != u.UID || res.User != u.Name || len(res.Dirs) == 0 || res.Note != "" {
			t.Fatalf("result %+v for %s", res, u)
		}
		for _, d := range res.Dirs {
			for _, p := range []string{d, filepath.Join(d, "cgroup.procs"), filepath.Join(d, "tasks")} {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != u.UID || int(st.Gid) != u.GID {
					t.Errorf("%s owned by %d:%d, want %d:%d", p, st.Uid, st.Gid, u.UID, u.GID)
				}
			}
		}
	}
	if parent, err := cgdelegate.Check(u.UID); err != nil || parent != cgdelegate.Parent(u.UID) {
		t.Fatalf("Check after setup --delegate = %q, %v", parent, err)
	}
	out, err = u.Command(home, bin, "-test.run=^TestAsUserHelper$", "--", "setup").CombinedOutput()
	if err != nil || strings.Contains(string(out), cgdelegate.FixCommand(u.Name)) || !strings.Contains(string(out), cgdelegate.Parent(u.UID)) {
		t.Fatalf("setup as %s after the delegation: %v\n%s\nwant a note naming the subtree", u, err, out)
	}
	if code, _, stderr := runCLI(t, "setup", "--delegate", "root"); code == 0 || !strings.Contains(stderr, "root needs no delegation") {
		t.Fatalf("setup --delegate root: exit %d, %s", code, stderr)
	}
}
