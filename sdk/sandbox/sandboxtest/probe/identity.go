package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// sandboxID is the uid and gid every backend runs the process as.
const sandboxID = 1000

func checkUID([]string) (bool, string) {
	r, e, s := unix.Getresuid()
	ids, err := statusField("Uid") // real, effective, saved, filesystem
	if err != nil {
		return false, err.Error()
	}
	want := strings.Repeat(fmt.Sprint(sandboxID)+" ", 4)
	ok := r == sandboxID && e == sandboxID && s == sandboxID && strings.Join(strings.Fields(ids), " ")+" " == want
	return ok, fmt.Sprintf("ruid=%d euid=%d suid=%d (status Uid: %s), want all %d", r, e, s, ids, sandboxID)
}

func checkGID([]string) (bool, string) {
	r, e, s := unix.Getresgid()
	groups, err := unix.Getgroups()
	if err != nil {
		return false, fmt.Sprintf("getgroups: %v", err)
	}
	ok := r == sandboxID && e == sandboxID && s == sandboxID
	for _, g := range groups {
		if g == 0 {
			ok = false
		}
	}
	return ok, fmt.Sprintf("rgid=%d egid=%d sgid=%d groups=%v, want gids %d and no group 0", r, e, s, groups, sandboxID)
}

// statusField returns the value of a "Key:\tvalue" line of
// /proc/self/status.
func statusField(key string) (string, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "", fmt.Errorf("opening /proc/self/status: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && k == key {
			return strings.TrimSpace(v), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading /proc/self/status: %w", err)
	}
	return "", fmt.Errorf("no %s line in /proc/self/status", key)
}

// capCheck checks that the capability set named by key is empty.
func capCheck(key string) checkFunc {
	return func([]string) (bool, string) {
		v, err := statusField(key)
		if err != nil && key == "CapAmb" {
			// gVisor's /proc/self/status has no CapAmb line: ask prctl.
			return ambientEmpty(err)
		}
		if err != nil {
			return false, err.Error()
		}
		ok := strings.Trim(v, "0") == "" && v != ""
		return ok, fmt.Sprintf("%s=%s, want all zero", key, v)
	}
}

// ambientEmpty asks prctl(PR_CAP_AMBIENT_IS_SET) about every capability
// up to CAP_LAST_CAP (where /proc/self/status does not say, statusErr).
func ambientEmpty(statusErr error) (bool, string) {
	last := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		set, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, uintptr(c), 0, 0)
		if errors.Is(err, unix.EINVAL) && underGVisor() {
			return true, fmt.Sprintf("%v; prctl(PR_CAP_AMBIENT): EINVAL: gVisor's kernel has no ambient capability set", statusErr)
		}
		if err != nil {
			return false, fmt.Sprintf("%v; prctl(PR_CAP_AMBIENT_IS_SET, %d): %v", statusErr, c, err)
		}
		if set != 0 {
			return false, fmt.Sprintf("%v; ambient capability %d is set", statusErr, c)
		}
	}
	return true, fmt.Sprintf("%v; prctl: no ambient capability among 0..%d", statusErr, last)
}

func checkNoNewPrivs([]string) (bool, string) {
	v, err := statusField("NoNewPrivs")
	if err != nil {
		// gVisor's /proc/self/status has no NoNewPrivs line: prctl alone.
		p, perr := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
		return perr == nil && p == 1, fmt.Sprintf("%v; prctl(PR_GET_NO_NEW_PRIVS)=%d (%v), want 1", err, p, perr)
	}
	p, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return false, fmt.Sprintf("NoNewPrivs=%s; prctl(PR_GET_NO_NEW_PRIVS): %v", v, err)
	}
	return v == "1" && p == 1, fmt.Sprintf("NoNewPrivs=%s prctl=%d, want 1", v, p)
}

func checkSeccompMode([]string) (bool, string) {
	v, err := statusField("Seccomp")
	if err != nil {
		return false, err.Error()
	}
	n, _ := statusField("Seccomp_filters")
	return v == "2", fmt.Sprintf("Seccomp=%s Seccomp_filters=%s, want mode 2 (filter)", v, n)
}
