// Package testuser gives a test a real, normal (non-root) host account to
// run things as: created with useradd under a unique name, with a private
// home it owns and subordinate id ranges in /etc/subuid and /etc/subgid
// (useradd's own), and removed with userdel when the test ends. Tests of
// what agentnode does for a user who is not root (the rootless sandbox,
// host placement) run their commands as this user.
//
// It is in sdk/ because tests of the command and of the bundled plugins,
// which may import only sdk/, both need it. It needs root and useradd.
package testuser

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/sys/user"
)

// User is a created account.
type User struct {
	Name     string
	UID, GID int
	Home     string // owned by the user, mode 0700
}

// Create makes a fresh account for tb and removes it (with its home and its
// subordinate id lines) at the end of tb. It calls skip with the reason when
// it cannot (not root, no useradd): the caller decides whether that is a
// skip or, in CI, a failure.
func Create(tb testing.TB, skip func(format string, args ...any)) *User {
	tb.Helper()
	if os.Geteuid() != 0 {
		skip("creating a user needs root")
		return nil
	}
	for _, bin := range []string{"useradd", "userdel"} {
		if _, err := exec.LookPath(bin); err != nil {
			skip("no %s (Debian's passwd package): %v", bin, err)
			return nil
		}
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	name := "antest" + hex.EncodeToString(b[:])
	// Not tb.TempDir: its parent is private to root, and the user must
	// reach its home.
	base, err := os.MkdirTemp("", "agentnode-testuser-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		tb.Fatal(err)
	}
	home := filepath.Join(base, name)
	var out []byte
	// -m with a home in a private temp dir; useradd adds the subordinate
	// ranges itself (SUB_UID_* of login.defs) because /etc/subuid exists.
	out, err = exec.Command("useradd", "-m", "-d", home, "-s", "/bin/sh", "-K", "UMASK=077", name).CombinedOutput()
	if err != nil {
		tb.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	tb.Cleanup(func() {
		if out, err := exec.Command("userdel", "-r", "-f", name).CombinedOutput(); err != nil {
			tb.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	u, err := user.LookupUser(name)
	if err != nil {
		tb.Fatalf("lookup %s: %v", name, err)
	}
	if err := os.Chmod(home, 0o700); err != nil {
		tb.Fatal(err)
	}
	tmp := filepath.Join(home, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chown(tmp, u.Uid, u.Gid); err != nil {
		tb.Fatal(err)
	}
	return &User{Name: name, UID: u.Uid, GID: u.Gid, Home: home}
}

// HasSubIDs reports whether /etc/subuid and /etc/subgid give u a range.
func (u *User) HasSubIDs() bool {
	for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
		data, err := os.ReadFile(f)
		if err != nil || !strings.Contains("\n"+string(data), "\n"+u.Name+":") {
			return false
		}
	}
	return true
}

// Command is exec.Command run as u (uid, gid, no supplementary groups) with
// u's home as HOME and working directory, TMPDIR in it (removed with the
// account) and a minimal environment plus env.
func (u *User) Command(env []string, name string, args ...string) *exec.Cmd {
	c := exec.Command(name, args...)
	c.Dir = u.Home
	c.Env = append([]string{"HOME=" + u.Home, "USER=" + u.Name, "LOGNAME=" + u.Name,
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR=" + filepath.Join(u.Home, "tmp")}, env...)
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: []uint32{}}}
	return c
}

// Executable copies the file at path (a test binary, a built command) to a
// directory u can reach and returns the copy, executable by u: go test's
// build directories are private to root.
func (u *User) Executable(tb testing.TB, path string) string {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	dir := filepath.Join(filepath.Dir(u.Home), "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dst
}

// String is "name (uid N)".
func (u *User) String() string { return fmt.Sprintf("%s (uid %s)", u.Name, strconv.Itoa(u.UID)) }
