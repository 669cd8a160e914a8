// Package treewatch keeps a verified directory tree sealed between two
// verifications: a Watch is an inotify watch on every directory and every
// regular file of a tree, armed before the tree is verified, and a tree
// whose watch saw nothing since is the tree that was verified. A long
// session (`agentnode mcp serve`, whose MCP servers stay up between calls)
// then asks "tainted?" — one non-blocking read and one lstat — instead of
// re-hashing thousands of installed files on every call (Seals).
//
// It sits in sdk/ because it is a primitive without policy: the kernel's
// artifact stage uses it (kernel → sdk), and it holds no decision of its
// own. What it cannot see, it reports as tainted (any event, a queue
// overflow, the root's path no longer naming the watched directory), and
// what it cannot arm (the inotify limits, a tree larger than MaxEntries) is
// an error: the caller then verifies in full every time.
//
// Why every file inode and not only the directories: a directory watch
// reports changes made through that directory's names only; a write
// through a hard link made elsewhere beforehand, or through a descriptor
// opened before, is reported on the file's own inode. Each entry is opened
// (O_PATH, no symlink followed) relative to its already-watched parent and
// watched through /proc/self/fd, so the watch is on exactly the inode the
// walk found; a name rebound after its parent's watch was armed is an
// event of the parent. Symlinks are not watched themselves: their target
// cannot change in place, only by replacing the link (a parent event).
//
// Not seen: writes through a shared writable memory mapping of a tree file
// (inotify reports no event for them; the mapping needs a descriptor open
// for writing, whose close is an event, so only one made before the watch
// was armed), which Seals bounds by verifying in full at the first call
// after MaxAge; and mounts over a path of the tree (no event either; making
// one needs privileges that could also change agentnode itself).
package treewatch

import (
	"errors"
	"fmt"
	"os"
	"path"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaxEntries (a variable for tests) bounds the entries one Watch takes (one inotify watch each):
// a larger tree is not watched (ErrTooLarge), so that one session never
// takes most of the user's inotify watches.
var MaxEntries = 65536

// Errors of Arm; the caller falls back to verifying in full.
var (
	// ErrTooLarge: the tree has more than MaxEntries entries.
	ErrTooLarge = errors.New("tree too large to watch")
	// ErrUnsupported: an entry could not be watched (the inotify limits:
	// fs.inotify.max_user_watches, max_user_instances; or no inotify).
	ErrUnsupported = errors.New("cannot watch the tree")
)

// mask is every change of a watched inode or of a watched directory's
// names. IN_Q_OVERFLOW, IN_UNMOUNT and IN_IGNORED come without asking; any
// event taints.
const mask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_DELETE |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_MOVED_FROM | unix.IN_MOVED_TO

// Watch is an armed watch over one tree. Its methods are safe for
// concurrent use.
type Watch struct {
	root     string
	dev, ino uint64

	mu      sync.Mutex
	fd      int              // the inotify instance; -1 once closed
	paths   map[int32]string // watch descriptor → path relative to root ("." for root)
	tainted string           // what was seen first ("" while clean)
	buf     [64 << 10]byte   // events are read into it
}

// Entries is how many inodes w watches.
func (w *Watch) Entries() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.paths)
}

// Arm watches every directory and regular file of the tree at root (root
// itself must be a directory, reached through its path as given). Arm it
// before verifying the tree: whatever changes after Arm returns, and
// during the walk after an entry's parent was watched, taints it.
func Arm(root string) (*Watch, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%w: inotify_init1: %w", ErrUnsupported, err)
	}
	w := &Watch{root: root, fd: fd, paths: map[int32]string{}}
	dir, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(dir, &st); err != nil {
		unix.Close(dir)
		w.Close()
		return nil, fmt.Errorf("stat %s: %w", root, err)
	}
	w.dev, w.ino = st.Dev, st.Ino
	if err := w.walk(dir, "."); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// walk watches directory dir (an open descriptor, closed here) at rel,
// then lists it and watches its entries.
func (w *Watch) walk(dir int, rel string) error {
	f := os.NewFile(uintptr(dir), rel)
	defer f.Close()
	if err := w.add(dir, rel); err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("list %s: %w", rel, err)
	}
	for _, name := range names {
		p := path.Join(rel, name)
		fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", p, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return fmt.Errorf("stat %s: %w", p, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			unix.Close(fd)
			sub, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open %s: %w", p, err)
			}
			if err := w.walk(sub, p); err != nil {
				return err
			}
			continue
		case unix.S_IFLNK:
			// Only replaced through its directory, which is watched.
		default:
			// Regular files; anything else is watched too and refused by
			// the verification that follows.
			err = w.add(fd, p)
		}
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	return nil
}

// add watches the inode open at fd.
func (w *Watch) add(fd int, rel string) error {
	if len(w.paths) >= MaxEntries {
		return fmt.Errorf("%w: more than %d entries", ErrTooLarge, MaxEntries)
	}
	wd, err := unix.InotifyAddWatch(w.fd, fmt.Sprintf("/proc/self/fd/%d", fd), mask)
	if err != nil {
		return fmt.Errorf("%w: %s: inotify_add_watch: %w", ErrUnsupported, rel, err)
	}
	w.paths[int32(wd)] = rel
	return nil
}

// Tainted reports what changed in the tree since Arm ("" if nothing did):
// the path of the first change seen, relative to the root, and what it
// was. It drains the pending events without blocking and checks that the
// root's path still names the watched directory (an ancestor renamed or
// replaced). Once tainted, a Watch stays tainted.
func (w *Watch) Tainted() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 && w.tainted == "" {
		w.tainted = ". (watch closed)"
	}
	for w.fd >= 0 {
		n, err := unix.Read(w.fd, w.buf[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil || n <= 0 {
			w.taint(fmt.Sprintf(". (reading the watch: %v)", err))
			break
		}
		w.events(w.buf[:n])
	}
	if w.tainted == "" {
		var st unix.Stat_t
		if err := unix.Stat(w.root, &st); err != nil {
			w.taint(fmt.Sprintf(". (%v)", err))
		} else if st.Dev != w.dev || st.Ino != w.ino {
			w.taint(". (the path now names another directory)")
		}
	}
	return w.tainted
}

// events records the first of the events in buf.
func (w *Watch) events(buf []byte) {
	for len(buf) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(buf) {
			w.taint(". (truncated event)")
			return
		}
		name := cString(buf[unix.SizeofInotifyEvent:end])
		buf = buf[end:]
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			w.taint(". (event queue overflow)")
			continue
		}
		p, ok := w.paths[ev.Wd]
		if !ok {
			p = "."
		}
		if name != "" {
			p = path.Join(p, name)
		}
		w.taint(p + " (" + describe(ev.Mask) + ")")
	}
}

func (w *Watch) taint(what string) {
	if w.tainted == "" {
		w.tainted = what
	}
}

// Close releases the inotify instance; a closed Watch is tainted.
func (w *Watch) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// describe names the change of an event mask.
func describe(m uint32) string {
	switch {
	case m&unix.IN_MODIFY != 0, m&unix.IN_CLOSE_WRITE != 0:
		return "written"
	case m&unix.IN_ATTRIB != 0:
		return "metadata or links changed"
	case m&unix.IN_CREATE != 0:
		return "created"
	case m&unix.IN_DELETE != 0, m&unix.IN_DELETE_SELF != 0:
		return "removed"
	case m&(unix.IN_MOVED_FROM|unix.IN_MOVED_TO|unix.IN_MOVE_SELF) != 0:
		return "renamed"
	case m&unix.IN_UNMOUNT != 0:
		return "unmounted"
	case m&unix.IN_IGNORED != 0:
		return "watch removed"
	}
	return fmt.Sprintf("event %#x", m)
}
