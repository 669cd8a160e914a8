package test

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/moby/sys/user"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agentnode/agentnode/sdk/sandbox/cgdelegate"
)

// newuser [delegate]: create a normal (non-root) account for the rest of
// the script, with a home it owns under a directory it can reach ($UHOME),
// useradd's subordinate ids and, with delegate, its delegated cgroup
// subtree (what `agentnode setup --delegate` makes); everything is removed
// when the script ends. $UNAME is its name. Root only.
func cmdNewUser(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) > 1 || (len(args) == 1 && args[0] != "delegate") {
		ts.Fatalf("usage: newuser [delegate]")
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "ane2e" + hex.EncodeToString(b[:])
	base, err := os.MkdirTemp("", "agentnode-e2e-user-")
	ts.Check(err)
	ts.Defer(func() { _ = os.RemoveAll(base) })
	ts.Check(os.Chmod(base, 0o755))
	home := filepath.Join(base, name)
	if out, err := exec.Command("useradd", "-m", "-d", home, "-s", "/bin/sh", "-K", "UMASK=077", name).CombinedOutput(); err != nil {
		ts.Fatalf("useradd: %v: %s", err, out)
	}
	ts.Defer(func() { _ = exec.Command("userdel", "-r", "-f", name).Run() })
	u, err := user.LookupUser(name)
	ts.Check(err)
	// Its own temporary directory (the rootless state root's fallback),
	// removed with it.
	tmp := filepath.Join(home, "tmp")
	ts.Check(os.Mkdir(tmp, 0o700))
	ts.Check(os.Chown(tmp, u.Uid, u.Gid))
	// Whoever delegates (this command, or the script's own
	// `agentnode setup --delegate`), the subtree goes with the user, and so
	// does the rootless plugin's state root (agentnode starts plugins
	// without TMPDIR: /tmp/agentnode-UID).
	ts.Defer(func() {
		if err := cgdelegate.Undelegate(u.Uid); err != nil {
			ts.Logf("undelegate %s: %v", name, err)
		}
		_ = os.RemoveAll(filepath.Join("/tmp", "agentnode-"+strconv.Itoa(u.Uid)))
	})
	if len(args) == 1 {
		_, err := cgdelegate.Delegate(u.Uid, u.Gid)
		ts.Check(err)
	}
	// The binaries (in the e2e build's private directory) must be
	// reachable by the user.
	ts.Check(os.Chmod(filepath.Dir(binDir), 0o711))
	ts.Check(os.Chmod(binDir, 0o755))
	ts.Setenv("UNAME", name)
	ts.Setenv("UHOME", home)
	ts.Setenv("UUID", strconv.Itoa(u.Uid))
}

// asuser CMD [ARG...]: run CMD like exec, as the account newuser made
// (setpriv: its uid and gid, no supplementary groups), with a minimal
// environment: PATH with the built binaries, HOME=$UHOME and
// AGENTNODE_HOME=$UHOME/.agentnode. stdout and stderr are kept for later
// checks; a non-zero exit fails unless negated (! asuser …).
func cmdAsUser(ts *testscript.TestScript, neg bool, args []string) {
	name, home, uid := ts.Getenv("UNAME"), ts.Getenv("UHOME"), ts.Getenv("UUID")
	if name == "" || len(args) == 0 {
		ts.Fatalf("usage: asuser CMD [ARG...] (after newuser)")
	}
	a := []string{"--reuid", uid, "--regid", uid, "--clear-groups", "--", "env", "-i",
		"PATH=" + binDir + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "USER=" + name,
		"AGENTNODE_HOME=" + filepath.Join(home, ".agentnode"), "AGENTNODE_NON_INTERACTIVE=1", "TMPDIR=" + filepath.Join(home, "tmp")}
	err := ts.Exec("setpriv", append(a, args...)...)
	switch {
	case err != nil && !neg:
		ts.Fatalf("asuser %v: %v", args, err)
	case err == nil && neg:
		ts.Fatalf("asuser %v: unexpected success", args)
	}
}
