package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// mount is one entry of the mount table (github.com/moby/sys/mountinfo).
type mount struct {
	point   string
	options []string // per-mount options (ro, nosuid, noexec, ...)
	fstype  string
}

func (m mount) has(opt string) bool {
	for _, o := range m.options {
		if o == opt {
			return true
		}
	}
	return false
}

func mounts() ([]mount, error) {
	infos, err := mountinfo.GetMounts(nil)
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	ms := make([]mount, 0, len(infos))
	for _, m := range infos {
		ms = append(ms, mount{point: m.Mountpoint, options: strings.Split(m.Options, ","), fstype: m.FSType})
	}
	return ms, nil
}

// mountAt returns the topmost mount at point.
func mountAt(point string) (mount, bool, error) {
	ms, err := mounts()
	if err != nil {
		return mount{}, false, err
	}
	var found mount
	ok := false
	for _, m := range ms {
		if m.point == point {
			found, ok = m, true
		}
	}
	return found, ok, nil
}

// roMount checks that point is a read-only mount.
func roMount(point string) attempt {
	m, ok, err := mountAt(point)
	switch {
	case err != nil:
		return att(false, err.Error())
	case !ok:
		return att(false, point+" is not a mount point")
	case !m.has("ro"):
		return att(false, fmt.Sprintf("%s is mounted %s, not ro", point, strings.Join(m.options, ",")))
	}
	return att(true, point+" is mounted ro")
}

// cannotCreate checks that a new file cannot be created in dir. A file that
// could be created is removed again.
func cannotCreate(dir string) attempt {
	name := filepath.Join(dir, fmt.Sprintf(".sandboxtest-probe-%d", os.Getpid()))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err == nil {
		f.Close()
		os.Remove(name)
		return att(false, "created "+name)
	}
	if errors.Is(err, os.ErrNotExist) {
		return att(false, fmt.Sprintf("%s does not exist: %v", dir, err))
	}
	return att(true, "creating a file in "+dir+": "+errText(err))
}

// cannotOpenForWriting checks that name cannot be opened for writing. It
// never writes: on an unconfined host these are live kernel files.
func cannotOpenForWriting(name string) attempt {
	fd, err := unix.Open(name, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
		return att(false, "opened "+name+" for writing")
	}
	return att(true, "opening "+name+" for writing: "+errText(err))
}

func checkRootfsReadonly([]string) (bool, string) {
	return all(roMount("/"), cannotCreate("/"), cannotCreate("/etc"), cannotOpenForWriting("/etc/passwd"))
}

func checkPackReadonly([]string) (bool, string) {
	if _, err := os.Stat("/pack/probe"); err != nil {
		return false, "the package is not at /pack: " + err.Error()
	}
	return all(roMount("/pack"), cannotCreate("/pack"), cannotOpenForWriting("/pack/probe-suid"))
}

func checkProcSysReadonly([]string) (bool, string) {
	return all(cannotOpenForWriting("/proc/sys/kernel/hostname"), cannotOpenForWriting("/proc/sys/kernel/core_pattern"),
		cannotOpenForWriting("/proc/sys/vm/drop_caches"))
}

// copySelf copies this executable into dir as an executable file.
func copySelf(dir string) (string, error) {
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return "", fmt.Errorf("opening /proc/self/exe: %w", err)
	}
	defer src.Close()
	dst, err := os.CreateTemp(dir, ".sandboxtest-exec-")
	if err != nil {
		return "", fmt.Errorf("creating a file in %s: %w", dir, err)
	}
	name := dst.Name()
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(name, 0o755)
	}
	if err != nil {
		os.Remove(name)
		return "", fmt.Errorf("copying the probe to %s: %w", name, err)
	}
	return name, nil
}

// noExecIn copies the probe into dir and tries to run the copy; exec must
// fail with EACCES (a noexec mount). When mustWrite is false, a directory
// that cannot be written is fine: nothing can be put there to run.
func noExecIn(dir string, mustWrite bool) attempt {
	name, err := copySelf(dir)
	if err != nil {
		return att(!mustWrite, err.Error())
	}
	defer os.Remove(name)
	err = exec.Command(name, "noop").Run()
	switch {
	case err == nil:
		return att(false, "executed a copy of the probe from "+dir)
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
		return att(true, "exec from "+dir+": "+errText(err))
	default:
		return att(false, "exec from "+dir+" failed with "+errText(err)+", not EACCES")
	}
}

func checkTmpNoexec([]string) (bool, string) {
	return all(noExecIn("/tmp", true))
}

// checkWritableNoexec tries every place a sandboxed process might be able to
// write: none may let it execute what it wrote.
func checkWritableNoexec([]string) (bool, string) {
	dirs := []string{"/", "/tmp", "/var/tmp", "/dev/shm", "/run", "/run/lock", "/sandbox-home", "/home", "/pack", "/dev"}
	if h := os.Getenv("HOME"); h != "" {
		dirs = append(dirs, h)
	}
	if ms, err := mounts(); err == nil {
		for _, m := range ms {
			if m.fstype == "tmpfs" {
				dirs = append(dirs, m.point)
			}
		}
	}
	seen := map[string]bool{}
	var res []attempt
	var writable []string
	for _, d := range dirs {
		if seen[d] {
			continue
		}
		seen[d] = true
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			continue
		}
		if unix.Access(d, unix.W_OK) != nil {
			continue
		}
		writable = append(writable, d)
		if a := noExecIn(d, false); !a.ok {
			res = append(res, a)
		}
	}
	if len(res) > 0 {
		return all(res...)
	}
	return true, fmt.Sprintf("no exec from the writable directories %v", writable)
}

func checkTmpWritable([]string) (bool, string) {
	name := fmt.Sprintf("/tmp/.sandboxtest-w-%d", os.Getpid())
	want := []byte("sandboxtest tmp check\n")
	if err := os.WriteFile(name, want, 0o600); err != nil {
		return false, "writing /tmp: " + errText(err)
	}
	defer os.Remove(name)
	got, err := os.ReadFile(name)
	if err != nil {
		return false, "reading back: " + err.Error()
	}
	if string(got) != string(want) {
		return false, fmt.Sprintf("read back %q", got)
	}
	return true, "/tmp is writable"
}

// checkTmpSizeLimit writes to /tmp until the file system is full; it must be
// full before limit plus some slack.
func checkTmpSizeLimit(args []string) (bool, string) {
	limit, err := strconv.ParseInt(arg(args, 0), 10, 64)
	if err != nil || limit <= 0 {
		return false, fmt.Sprintf("bad limit argument %q", arg(args, 0))
	}
	stop := limit + 16<<20
	f, err := os.CreateTemp("/tmp", ".sandboxtest-fill-")
	if err != nil {
		return false, "creating a file in /tmp: " + errText(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	var written int64
	for written < stop {
		n, err := f.Write(buf)
		written += int64(n)
		if err != nil {
			if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) || errors.Is(err, unix.EFBIG) {
				return true, fmt.Sprintf("/tmp full after %d bytes (limit %d): %s", written, limit, errText(err))
			}
			return false, fmt.Sprintf("writing /tmp after %d bytes: %s", written, errText(err))
		}
	}
	return false, fmt.Sprintf("wrote %d bytes to /tmp, limit %d: /tmp is not size-limited", written, limit)
}

func checkKcoreMasked([]string) (bool, string) {
	f, err := os.Open("/proc/kcore")
	if err != nil {
		return true, "opening /proc/kcore: " + errText(err)
	}
	defer f.Close()
	buf := make([]byte, 64)
	n, err := f.Read(buf)
	if n == 0 {
		return true, fmt.Sprintf("/proc/kcore reads as empty (%v)", err)
	}
	return false, fmt.Sprintf("read %d bytes of the kernel core image from /proc/kcore", n)
}

func checkSysrqMasked([]string) (bool, string) {
	// Never write: on an unconfined host this would act.
	f, err := os.OpenFile("/proc/sysrq-trigger", os.O_WRONLY, 0)
	if err != nil {
		return true, "opening /proc/sysrq-trigger for writing: " + errText(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return true, "/proc/sysrq-trigger is masked by a character device (/dev/null)"
	}
	return false, "opened /proc/sysrq-trigger for writing"
}

func checkFirmwareMasked([]string) (bool, string) {
	ents, err := os.ReadDir("/sys/firmware")
	if err != nil {
		return true, "reading /sys/firmware: " + errText(err)
	}
	if len(ents) == 0 {
		return true, "/sys/firmware is empty"
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return false, fmt.Sprintf("/sys/firmware lists %v", names)
}
