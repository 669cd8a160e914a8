// Package subid holds agentnode's reservation of subordinate user and group
// ids in /etc/subuid and /etc/subgid (subuid(5), subgid(5)): one block of
// BlockSize ids under the name Name, the same range in both files, which no
// other line of either file and no account of /etc/passwd or /etc/group
// uses. A sandbox backend that gives each sandbox its own user namespace
// (the libcontainer plugin) maps the sandbox's ids into this block, so that
// the tool's uid is no host account's and no other sandbox's.
//
// `agentnode setup` makes the reservation (Reserve); the backend reads it
// (Lookup) and refuses to run without it. The package is in sdk/ so that
// both, the command and a plugin that may import only sdk/, share one
// implementation of the file format and of the range rules.
package subid

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/moby/sys/user"

	"github.com/agentnode/agentnode/sdk/atomicfile"
)

const (
	// Name is the owner name of agentnode's lines in both files.
	Name = "agentnode"
	// BlockSize is the number of ids Reserve reserves.
	BlockSize = 65536
	// firstStart is where Reserve starts looking: useradd's default
	// SUB_UID_MIN, above every system and regular account.
	firstStart = 100000
)

// The real files and the account databases Reserve keeps clear of.
const (
	UIDFile    = "/etc/subuid"
	GIDFile    = "/etc/subgid"
	PasswdFile = "/etc/passwd"
	GroupFile  = "/etc/group"
)

// avoid are id ranges Reserve never chooses although no file names them:
// the kernel's overflow ids and systemd's container and dynamic ranges
// (systemd allocates them without writing /etc/subuid), and everything
// from 2^31, which some tools treat as negative.
var avoid = []Range{
	{Start: 61184, Count: 65520 - 61184 + 1},           // systemd DynamicUser=
	{Start: 65534, Count: 2},                           // nobody, and the invalid 16-bit -1
	{Start: 524288, Count: 1879048191 - 524288 + 1},    // systemd-nspawn --private-users=pick
	{Start: 1 << 31, Count: (1 << 32) - (1 << 31) - 1}, // signed trouble, and -1
}

// ErrNoReservation is returned by Lookup when a file holds no usable line
// for Name: agentnode setup has not run (as root) on this host.
var ErrNoReservation = errors.New("no subordinate id reservation for " + Name + " (run `agentnode setup` as root)")

// Range is a block of ids [Start, Start+Count).
type Range struct {
	Start uint32
	Count uint32
}

// End is the first id after r.
func (r Range) End() uint64 { return uint64(r.Start) + uint64(r.Count) }

func (r Range) overlaps(o Range) bool {
	return uint64(r.Start) < o.End() && uint64(o.Start) < r.End()
}

func (r Range) String() string { return fmt.Sprintf("%d-%d", r.Start, r.End()-1) }

// Lookup returns Name's range in the subuid- or subgid-format file path: its
// first line for Name with a count of at least 2. ErrNoReservation (wrapped)
// when there is none or the file does not exist.
func Lookup(path string) (Range, error) {
	return lookup(path, Name)
}

// LookupUser returns the range of a normal user (by account name or uid)
// in the subuid- or subgid-format file path, as Lookup does for Name: the
// ids newuidmap and newgidmap let that user map. ErrNoReservation
// (wrapped) when there is none.
func LookupUser(path, name string, uid int) (Range, error) {
	return lookup(path, name, strconv.Itoa(uid))
}

func lookup(path string, names ...string) (Range, error) {
	ids, err := user.ParseSubIDFileFilter(path, func(s user.SubID) bool { return slices.Contains(names, s.Name) })
	if errors.Is(err, fs.ErrNotExist) {
		return Range{}, fmt.Errorf("%s: %w", path, ErrNoReservation)
	}
	if err != nil {
		return Range{}, fmt.Errorf("subid: %w", err)
	}
	for _, s := range ids {
		if s.SubID <= 0 || s.Count < 2 || s.SubID+s.Count > 1<<32-1 {
			continue
		}
		return Range{Start: uint32(s.SubID), Count: uint32(min(s.Count, 1<<32-1))}, nil
	}
	return Range{}, fmt.Errorf("%s: %w", path, ErrNoReservation)
}

// Files names the files Reserve reads and writes; zero fields are the real
// ones (UIDFile and friends). Tests point them at private copies.
type Files struct {
	UID, GID, Passwd, Group string
}

func (f Files) withDefaults() Files {
	def := func(p *string, d string) {
		if *p == "" {
			*p = d
		}
	}
	def(&f.UID, UIDFile)
	def(&f.GID, GIDFile)
	def(&f.Passwd, PasswdFile)
	def(&f.Group, GroupFile)
	return f
}

// Reserve makes sure both files hold a line for Name with the same range,
// and returns it; added reports whether it wrote one. A reservation already
// in both files with the same range is kept as it is. Otherwise it picks
// the lowest BlockSize-aligned block from 100000 that overlaps no line of
// either file, no uid of the passwd file, no gid of the group file and none
// of the ranges systemd allocates by itself, and appends
// "agentnode:START:65536" to each file that lacks it: atomically (a
// temporary file renamed over it, keeping its mode and owner), the other
// lines byte for byte as they were. A file that holds a line for Name with
// another range than the other file is an error (fix it by hand): Reserve
// never rewrites a line. Concurrent Reserves are serialised by an advisory
// lock on the subuid file's directory.
func Reserve(files Files) (r Range, added bool, err error) {
	f := files.withDefaults()
	// The lock is on the files' directory (flock works on a directory):
	// no lock file is left in /etc.
	lock, err := os.Open(filepath.Dir(f.UID))
	if err != nil {
		return Range{}, false, fmt.Errorf("subid: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return Range{}, false, fmt.Errorf("subid: locking: %w", err)
	}
	ur, uerr := Lookup(f.UID)
	gr, gerr := Lookup(f.GID)
	switch {
	case uerr == nil && gerr == nil:
		if ur != gr {
			return Range{}, false, fmt.Errorf("subid: %s reserves %s for %s but %s reserves %s: make them the same", f.UID, ur, Name, f.GID, gr)
		}
		return ur, false, nil
	case uerr != nil && !errors.Is(uerr, ErrNoReservation):
		return Range{}, false, uerr
	case gerr != nil && !errors.Is(gerr, ErrNoReservation):
		return Range{}, false, gerr
	case uerr == nil:
		r = ur
	case gerr == nil:
		r = gr
	default:
		if r, err = pick(f); err != nil {
			return Range{}, false, err
		}
	}
	// The range the files agree on must still be clear of everything else.
	if err := checkClear(f, r); err != nil {
		return Range{}, false, err
	}
	line := fmt.Sprintf("%s:%d:%d\n", Name, r.Start, r.Count)
	if uerr != nil {
		if err := appendLine(f.UID, line); err != nil {
			return Range{}, false, err
		}
	}
	if gerr != nil {
		if err := appendLine(f.GID, line); err != nil {
			return Range{}, false, err
		}
	}
	return r, true, nil
}

// taken lists every range r must not overlap: the other lines of both
// files, each passwd uid and group gid, and avoid.
func taken(f Files) ([]Range, error) {
	out := append([]Range(nil), avoid...)
	for _, p := range []string{f.UID, f.GID} {
		ids, err := user.ParseSubIDFileFilter(p, func(s user.SubID) bool { return s.Name != Name })
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("subid: %w", err)
		}
		for _, s := range ids {
			if s.SubID < 0 || s.Count <= 0 || s.SubID >= 1<<32 {
				continue
			}
			out = append(out, Range{Start: uint32(s.SubID), Count: uint32(min(s.Count, 1<<32-s.SubID-1))})
		}
	}
	users, err := user.ParsePasswdFile(f.Passwd)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("subid: %w", err)
	}
	for _, u := range users {
		if u.Uid >= 0 && u.Uid < 1<<32-1 {
			out = append(out, Range{Start: uint32(u.Uid), Count: 1})
		}
	}
	groups, err := user.ParseGroupFile(f.Group)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("subid: %w", err)
	}
	for _, g := range groups {
		if g.Gid >= 0 && g.Gid < 1<<32-1 {
			out = append(out, Range{Start: uint32(g.Gid), Count: 1})
		}
	}
	return out, nil
}

// pick returns the lowest clear aligned block.
func pick(f Files) (Range, error) {
	used, err := taken(f)
	if err != nil {
		return Range{}, err
	}
next:
	for start := uint64(firstStart); start+BlockSize < 1<<32; start += BlockSize {
		c := Range{Start: uint32(start), Count: BlockSize}
		for _, u := range used {
			if c.overlaps(u) {
				continue next
			}
		}
		return c, nil
	}
	return Range{}, errors.New("subid: no free block of subordinate ids")
}

// checkClear refuses r when it overlaps something it must not.
func checkClear(f Files, r Range) error {
	used, err := taken(f)
	if err != nil {
		return err
	}
	for _, u := range used {
		if r.overlaps(u) {
			return fmt.Errorf("subid: the %s range %s overlaps ids %s in use on this host", Name, r, u)
		}
	}
	return nil
}

// appendLine rewrites path atomically with line appended, keeping its mode
// and owner (a missing file is created 0644, root's).
func appendLine(path, line string) error {
	old, err := os.ReadFile(path)
	mode, uid, gid := fs.FileMode(0o644), -1, -1
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("subid: %w", err)
	default:
		fi, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("subid: %w", err)
		}
		mode = fi.Mode().Perm()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	}
	data := string(old)
	if data != "" && !strings.HasSuffix(data, "\n") {
		data += "\n"
	}
	data += line
	if err := atomicfile.WriteFile(path, []byte(data), mode); err != nil {
		return fmt.Errorf("subid: writing %s: %w", path, err)
	}
	if uid >= 0 && (uid != os.Geteuid() || gid != os.Getegid()) {
		if err := os.Chown(path, uid, gid); err != nil {
			return fmt.Errorf("subid: %s: %w", path, err)
		}
	}
	return nil
}
