package hostexec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/executor/confine"
	"github.com/agentnode/agentnode/executor/confine/confinetest/metaattack"
	"github.com/agentnode/agentnode/kernel/ownlimits"
	"github.com/agentnode/agentnode/kernel/reason"
)

// pathAttacks name a file by path; fdAttacks open it read-only first (so
// their target must be one Landlock lets the tool read: its package).
var (
	pathAttacks = []string{
		"fchmodat", "fchmodat2", "fchownat", "utimensat", "utimensat_now",
		"setxattr", "lsetxattr", "setxattrat", "removexattr", "lremovexattr", "removexattrat", "file_setattr",
	}
	fdAttacks = []string{"fchmod", "fchown", "futimens", "fsetxattr", "fremovexattr", "chattr"}
)

func init() {
	// the calls only older ABIs have (metaattack adds them on amd64)
	for _, name := range []string{"chmod", "chown", "lchown", "utime", "utimes", "futimesat"} {
		if _, ok := metaattack.Checks[name]; ok {
			pathAttacks = append(pathAttacks, name)
		}
	}
}

// plantFile writes a file with mode and the xattr metaattack.Name = "keep"
// (when the file system takes user xattrs; xattrs says whether it did).
func plantFile(t *testing.T, path string, mode os.FileMode) (xattrs bool) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho victim\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // whatever the umask
		t.Fatal(err)
	}
	err := unix.Setxattr(path, metaattack.Name, []byte("keep"), 0)
	if err != nil && !errors.Is(err, unix.ENOTSUP) {
		t.Fatal(err)
	}
	return err == nil
}

// fileState is everything about path the attacks could change: mode,
// owner, modification and change times, the xattr and the inode flags.
func fileState(t *testing.T, path string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := unix.Getxattr(path, metaattack.Name, buf)
	xattr := "none"
	if err == nil {
		xattr = string(buf[:n])
	}
	flags := "?"
	if fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		if f, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS); err == nil {
			flags = fmt.Sprintf("%#x", f)
		}
		unix.Close(fd)
	}
	return fmt.Sprintf("mode=%o uid=%d gid=%d mtime=%d.%d ctime=%d.%d xattr=%s flags=%s", st.Mode, st.Uid, st.Gid,
		st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec, xattr, flags)
}

// startSleeper starts an unrelated process of the same user, killed at
// the end of the test.
func startSleeper(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

// procLimits is /proc/PID/limits.
func procLimits(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ownLimits are the test process's own FSIZE and NOFILE limits.
func ownLimits(t *testing.T) string {
	t.Helper()
	var fsize, nofile unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_FSIZE, &fsize) != nil || unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile) != nil {
		t.Fatal("getrlimit")
	}
	return fmt.Sprintf("fsize=%s nofile=%s", ownlimits.Format(fsize), ownlimits.Format(nofile))
}

// TestConfinedMetadataAndLimits: a confined tool cannot change the mode,
// owner, timestamps, extended attributes or inode flags of a file it can
// name — a "binary" and a 0600 secret outside its paths, by path; a file
// of its package, through a descriptor opened read-only — nor the
// resource limits of an unrelated process or of agentnode, its parent.
// Every attempt fails with EPERM and leaves its target as it was, while
// the tool's own limits, and touching and writing its work dir, still
// work. The control runs the same attacks unconfined against copies of
// the targets: they go through on this machine, so the test can fail.
func TestConfinedMetadataAndLimits(t *testing.T) {
	requireLandlock(t)
	pack := escapePack(t)
	outside := t.TempDir()
	binary, secret := filepath.Join(outside, "victim-bin"), filepath.Join(outside, "secret")
	plantFile(t, binary, 0o755)
	plantFile(t, secret, 0o600)
	packFile := filepath.Join(pack, "data.txt")
	plantFile(t, packFile, 0o644)
	targets := []string{binary, secret, packFile}
	before := map[string]string{}
	for _, p := range targets {
		before[p] = fileState(t, p)
	}
	sleeper := startSleeper(t)
	sleeperBefore, ownBefore := procLimits(t, sleeper), ownLimits(t)
	victim := strconv.Itoa(sleeper)

	var want []outcome
	for _, a := range pathAttacks {
		want = append(want, outcome{a + "=" + binary, "EPERM"}, outcome{a + "=" + secret, "EPERM"})
	}
	for _, a := range fdAttacks {
		want = append(want, outcome{a + "=$PACK_DIR/data.txt", "EPERM"})
	}
	want = append(want,
		// E2: an unrelated process of the same user
		outcome{"prlimit_cpu=" + victim, "EPERM"},
		outcome{"prlimit_nofile=" + victim, "EPERM"},
		outcome{"prlimit_read=" + victim, "EPERM"},
		// E3: agentnode itself
		outcome{"prlimit_fsize=ppid", "EPERM"},
		outcome{"prlimit_read=ppid", "EPERM"},
		// its own limits: through pid 0 and setrlimit, not through its
		// own pid (the filter cannot know it)
		outcome{"prlimit_self", "allowed"},
		outcome{"setrlimit", "allowed"},
		outcome{"prlimit_ownpid", "EPERM"},
		// its work dir: write, then touch (futimens(fd, NULL))
		outcome{"write=$HOME/f", "allowed"},
		outcome{"futimens_now=$HOME/f", "allowed"},
	)
	got, res, err := runEscape(t, pack, &Confinement{Mode: confine.ModeRequired}, checksOf(want)...)
	expect(t, got, want)
	if err != nil || res.ExitCode != 0 || res.Confinement != "" {
		t.Errorf("Run: %v, exit %d, confinement %q, stderr %s", err, res.ExitCode, res.Confinement, res.Stderr)
	}
	for _, p := range targets {
		if after := fileState(t, p); after != before[p] {
			t.Errorf("%s changed:\n before %s\n after  %s", p, before[p], after)
		}
	}
	if after := procLimits(t, sleeper); after != sleeperBefore {
		t.Errorf("the unrelated process's limits changed:\n%s\n%s", sleeperBefore, after)
	}
	if after := ownLimits(t); after != ownBefore {
		t.Errorf("agentnode's limits changed: %s, was %s", after, ownBefore)
	}

	t.Run("control", func(t *testing.T) {
		// Unconfined, against a copy of the target per attack: each goes
		// through, unless this file system lacks the feature.
		ctl := t.TempDir()
		var args []string
		for _, a := range append(append([]string(nil), pathAttacks...), fdAttacks...) {
			p := filepath.Join(ctl, a)
			plantFile(t, p, 0o600)
			args = append(args, a+"="+p)
		}
		ctlSleeper := startSleeper(t)
		ctlBefore := procLimits(t, ctlSleeper)
		args = append(args, "prlimit_cpu="+strconv.Itoa(ctlSleeper), "prlimit_nofile="+strconv.Itoa(ctlSleeper),
			"prlimit_ownpid")
		got, res, err := runEscape(t, pack, nil, args...)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		var unsupported []string
		for _, a := range args {
			switch g := got[a]; {
			case g == "allowed":
			case strings.Contains(g, "EOPNOTSUPP") || strings.Contains(g, "ENOTTY") || strings.Contains(g, "ENOSYS"):
				unsupported = append(unsupported, a+": "+g)
			default:
				t.Errorf("control %s: %q, want allowed (exit %d, stderr %s)", a, g, res.ExitCode, res.Stderr)
			}
		}
		sort.Strings(unsupported)
		if len(unsupported) > 0 {
			t.Logf("not supported here, so not an attack on this machine: %s", strings.Join(unsupported, "; "))
		}
		if len(unsupported) > 3 {
			t.Errorf("the control reached too few attacks")
		}
		if after := procLimits(t, ctlSleeper); after == ctlBefore {
			t.Error("the unconfined prlimit did not show in the process's limits: the check above cannot fail")
		}
	})
}

// runEscape runs the attacker with c (nil: unconfined) and returns the
// outcome of each check, the result and Run's error.
func runEscape(t *testing.T, pack string, c *Confinement, checks ...string) (map[string]string, *Result, error) {
	t.Helper()
	req := &Request{PackageDir: pack, Entrypoint: "escape", Args: checks, Env: AllowedEnv(os.Environ()),
		Timeout: 20 * time.Second, Confine: c}
	res, err := Run(context.Background(), req)
	if res == nil {
		t.Fatalf("Run: %v", err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if name, outcome, ok := strings.Cut(line, ": "); ok {
			got[name] = outcome
		}
	}
	return got, res, err
}

// TestParentLimitsRestored is the second line behind the filter: a tool
// that got to lower agentnode's RLIMIT_FSIZE (here unconfined, so nothing
// stops its prlimit) leaves it lowered no longer than its run — Run puts
// it back and says what happened with sandbox_unavailable — and files can
// be written again.
func TestParentLimitsRestored(t *testing.T) {
	pack := escapePack(t)
	before := ownLimits(t)
	got, res, err := runEscape(t, pack, nil, "prlimit_fsize=ppid")
	if got["prlimit_fsize=ppid"] != "allowed" {
		t.Fatalf("the unconfined tool could not lower its parent's limit (control): %q, stderr %s",
			got["prlimit_fsize=ppid"], res.Stderr)
	}
	if !errors.Is(err, ownlimits.ErrChanged) || !errors.Is(err, reason.ErrSandboxUnavailable) ||
		!strings.Contains(err.Error(), "FSIZE; restored") {
		t.Fatalf("Run: %v", err)
	}
	if after := ownLimits(t); after != before {
		t.Fatalf("limits not restored: %s, was %s", after, before)
	}
	if err := os.WriteFile(filepath.Join(t.TempDir(), "f"), []byte("written"), 0o600); err != nil {
		t.Fatalf("write after the run: %v", err)
	}
}
