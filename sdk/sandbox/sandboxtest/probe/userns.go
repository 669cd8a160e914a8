package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// usernsReady is the line userns-host-ids prints once it waits for the
// suite to look at it from the host.
const usernsReady = "userns-host-ids-ready"

// idExtent is one line of /proc/self/{uid,gid}_map: inside, outside, count.
type idExtent struct{ inside, outside, count uint64 }

// readIDMap reads one of this process's id maps. Read from inside the
// namespace, "outside" is the id in the parent namespace (the host's).
func readIDMap(name string) ([]idExtent, string, error) {
	b, err := os.ReadFile("/proc/self/" + name)
	if err != nil {
		return nil, "", fmt.Errorf("reading /proc/self/%s: %w", name, err)
	}
	var out []idExtent
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e idExtent
		if _, err := fmt.Sscan(l, &e.inside, &e.outside, &e.count); err != nil {
			return nil, "", fmt.Errorf("/proc/self/%s: line %q: %w", name, l, err)
		}
		out = append(out, e)
	}
	return out, strings.Join(strings.Fields(string(b)), " "), nil
}

// mapsTo returns the outside id of inside, and whether it is mapped.
func mapsTo(m []idExtent, inside uint64) (uint64, bool) {
	for _, e := range m {
		if inside >= e.inside && inside < e.inside+e.count {
			return e.outside + inside - e.inside, true
		}
	}
	return 0, false
}

// checkUsernsMapped: the process is in a user namespace whose uid and gid
// maps are not the identity: no extent maps an id to itself, and the
// sandbox user (1000) is some other id on the host (not 1000, not 0).
func checkUsernsMapped([]string) (bool, string) {
	var details []string
	ok := true
	for _, name := range []string{"uid_map", "gid_map"} {
		m, text, err := readIDMap(name)
		if err != nil {
			return false, err.Error()
		}
		for _, e := range m {
			if e.inside == e.outside {
				ok = false
			}
		}
		host, mapped := mapsTo(m, sandboxID)
		if !mapped || host == sandboxID || host == 0 {
			ok = false
		}
		details = append(details, fmt.Sprintf("%s %q (%d is host %d, mapped %v)", name, text, sandboxID, host, mapped))
	}
	return ok, strings.Join(details, "; ") + "; want no identity extent and the sandbox user on another host id"
}

// checkUsernsHostFile: PATH...: every file, a host file of mode 0600 owned
// by a host account (the invoking user, uid 1000) mounted in, cannot be
// opened: EACCES.
func checkUsernsHostFile(args []string) (bool, string) {
	if len(args) == 0 {
		return false, "no file to try"
	}
	ok := true
	var details []string
	for _, p := range args {
		var st unix.Stat_t
		owner := "?"
		if unix.Stat(p, &st) == nil {
			owner = fmt.Sprintf("%d:%d mode %#o", st.Uid, st.Gid, st.Mode&0o7777)
		}
		f, err := os.Open(p)
		switch {
		case err == nil:
			b, _ := io.ReadAll(io.LimitReader(f, 64))
			f.Close()
			ok = false
			details = append(details, fmt.Sprintf("%s (owner inside %s) READ: %q", p, owner, b))
		case errors.Is(err, unix.EACCES):
			details = append(details, fmt.Sprintf("%s (owner inside %s): EACCES", p, owner))
		default:
			ok = false
			details = append(details, fmt.Sprintf("%s: %v, want EACCES", p, err))
		}
	}
	return ok, strings.Join(details, "; ")
}

// checkUsernsHostIDs: TOKEN. Prints usernsReady and waits until stdin
// ends, while the suite reads this process's ids from the host (the suite
// decides the check); then reports its maps. TOKEN only marks the command
// line, so that the suite finds this process on the host.
func checkUsernsHostIDs([]string) (bool, string) {
	fmt.Println(usernsReady)
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	_, uids, err := readIDMap("uid_map")
	if err != nil {
		return false, err.Error()
	}
	r, e, s := unix.Getresuid()
	return true, fmt.Sprintf("inside uid %d/%d/%d, uid_map %q", r, e, s, uids)
}
