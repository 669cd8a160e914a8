package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/reason"
)

// Defaults of Options.
const (
	DefaultMaxSizeBytes = 10 << 20
	DefaultMaxFiles     = 5
)

// Options tune a Log. Zero values take the defaults.
type Options struct {
	// MaxSizeBytes: the active file is rotated before a record would make it
	// larger (a single larger record still gets a file of its own).
	MaxSizeBytes int64
	// MaxFiles is how many files are kept, the active one included: the
	// oldest rotated file beyond it is deleted. At least 2 (smaller values
	// are raised to 2), so the newest rotated file always carries the chain.
	MaxFiles int
	// Anchor, if set, keeps the head of the chain sealed outside the log
	// (anchor.go, specs/audit.md): every append checks the log against it
	// and moves it on. Nil: the bare hash chain (tests, benchmarks). Every
	// writer of one log must use the same anchor: an append without it
	// leaves the anchor behind, and the next anchored append refuses.
	Anchor *Anchor
}

// Log appends to the audit log in one directory. It is safe for concurrent
// use by goroutines and by several processes (each with its own Log).
type Log struct {
	dir  string
	opts Options

	mu     sync.Mutex
	closed bool
	lock   *os.File // audit.lock, flock'ed around every append
	cdir   string   // CanonicalDir(dir), what the anchor is bound to
	key    []byte   // the anchor's seal key, once read
	keyID  string   // lockfile.KeyID(key)
	f      *os.File // the active file, O_APPEND
	dev    uint64   // identity of f, to notice a rotation by another process
	ino    uint64

	// valid: size, seq and hash describe the end of f as this Log last
	// wrote or read it; another process's append changes f's size.
	valid bool
	size  int64
	seq   uint64
	hash  string
	buf   []byte
}

func unavailable(format string, args ...any) error {
	return reason.New(reason.AuditUnavailable, format, args...)
}

// Open opens (creating with mode 0700 and 0600) the audit log in dir. Every
// error wraps reason.ErrAuditUnavailable.
func Open(dir string, opts Options) (*Log, error) {
	if opts.MaxSizeBytes <= 0 {
		opts.MaxSizeBytes = DefaultMaxSizeBytes
	}
	if opts.MaxFiles <= 0 {
		opts.MaxFiles = DefaultMaxFiles
	}
	opts.MaxFiles = max(opts.MaxFiles, 2)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, unavailable("create audit directory: %w", err)
	}
	lockPath := filepath.Join(dir, LockName)
	lock, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, unavailable("open audit lock: %w", err)
	}
	l := &Log{dir: dir, opts: opts, lock: lock}
	if opts.Anchor != nil {
		if l.cdir, err = CanonicalDir(dir); err == nil {
			err = os.MkdirAll(filepath.Dir(opts.Anchor.Path), 0o700)
		}
		if err != nil {
			_ = lock.Close()
			return nil, unavailable("audit anchor: %w", err)
		}
	}
	if err := l.openActive(); err != nil {
		_ = lock.Close()
		return nil, err
	}
	return l, nil
}

// openActive opens the active file, creating it if needed, and forgets the
// cached end-of-log state.
func (l *Log) openActive() error {
	path := filepath.Join(l.dir, FileName)
	flags := os.O_RDWR | os.O_APPEND | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	f, err := os.OpenFile(path, flags|os.O_CREATE|os.O_EXCL, 0o600)
	created := err == nil
	if errors.Is(err, fs.ErrExist) {
		f, err = os.OpenFile(path, flags, 0)
	}
	if err != nil {
		return unavailable("open audit log: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		_ = f.Close()
		return unavailable("stat audit log %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = f.Close()
		return unavailable("audit log %s is not a regular file", path)
	}
	if st.Mode&0o077 != 0 {
		if err := f.Chmod(0o600); err != nil {
			_ = f.Close()
			return unavailable("restrict audit log permissions: %w", err)
		}
	}
	if created {
		if err := syncDir(l.dir); err != nil {
			_ = f.Close()
			return unavailable("create audit log: %w", err)
		}
	}
	if l.f != nil {
		_ = l.f.Close()
	}
	l.f, l.dev, l.ino = f, uint64(st.Dev), st.Ino
	l.valid = false
	return nil
}

// Append fills r's Seq, TS, Prev and Hash, writes it as one line and makes
// it durable (fdatasync) before returning. Concurrent appends, from this or
// other processes, are serialised by an flock on audit.lock. Every error
// wraps reason.ErrAuditUnavailable; after an error nothing may run.
//
// Append also caps r.Reason at 4 KiB (ending it in "…") and turns a nil
// GuardChain into an empty one, so r is what the log holds.
func (l *Log) Append(r *Record) error {
	if r == nil {
		return unavailable("append: nil audit record")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return unavailable("append to a closed audit log")
	}
	if err := lockFile(l.lock, unix.LOCK_EX); err != nil {
		return unavailable("lock audit log: %w", err)
	}
	defer func() { _ = unlockFile(l.lock) }()
	if err := l.refresh(); err != nil {
		return err
	}
	return l.write(r)
}

// refresh makes f the current active file and size, seq and hash its end.
// Called with the lock held. It reads only the end of the file, and only
// when another process wrote since this Log last did.
func (l *Log) refresh() error {
	path := filepath.Join(l.dir, FileName)
	var st unix.Stat_t
	err := unix.Lstat(path, &st)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return unavailable("stat audit log %s: %w", path, err)
	}
	if err != nil || uint64(st.Dev) != l.dev || st.Ino != l.ino {
		// Rotated (or removed) by another process: continue in the new file.
		if err := l.openActive(); err != nil {
			return err
		}
	}
	if err := unix.Fstat(int(l.f.Fd()), &st); err != nil {
		return unavailable("stat audit log %s: %w", path, err)
	}
	if l.valid && st.Size == l.size {
		return nil
	}
	l.valid = false
	lines, torn, err := LastLines(l.f, st.Size, 1)
	if err != nil {
		return unavailable("read the end of the audit log: %w", err)
	}
	l.size = st.Size - int64(len(torn))
	if len(lines) == 1 {
		li, err := parseLine(lines[0])
		if err != nil {
			return unavailable("the last record of %s is unreadable (%v); the log was damaged: run `agentnode audit verify`", path, err)
		}
		l.seq, l.hash = li.Seq, string(li.Hash)
	} else if l.seq, l.hash, err = l.lastRotated(); err != nil {
		return err
	}
	l.valid = true
	if len(torn) > 0 {
		return l.recoverTorn(torn)
	}
	return nil
}

// lastRotated returns the seq and hash of the newest record in a rotated
// file, for an empty active file; Genesis when the log holds no record.
func (l *Log) lastRotated() (uint64, string, error) {
	files, err := ListFiles(l.dir)
	if err != nil {
		return 0, "", unavailable("list audit files: %w", err)
	}
	for i := len(files) - 1; i >= 0; i-- {
		if files[i].N == 0 {
			continue
		}
		path := filepath.Join(l.dir, files[i].Name)
		line, err := lastLineOf(path)
		if err != nil {
			return 0, "", unavailable("read the end of %s: %w", path, err)
		}
		if line == nil {
			continue
		}
		li, err := parseLine(line)
		if err != nil {
			return 0, "", unavailable("the last record of %s is unreadable (%v); the log was damaged: run `agentnode audit verify`", path, err)
		}
		return li.Seq, string(li.Hash), nil
	}
	return 0, Genesis, nil
}

func lastLineOf(path string) ([]byte, error) {
	f, err := bounded.Open(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	lines, torn, err := LastLines(f, st.Size(), 1)
	if err != nil {
		return nil, err
	}
	if len(torn) > 0 {
		return nil, fmt.Errorf("%s ends in a torn line", path)
	}
	if len(lines) == 0 {
		return nil, nil
	}
	return lines[0], nil
}

// recoverTorn handles an active file that ends in an unfinished line: a
// writer stopped (crashed, lost power) in the middle of an append, before it
// returned, so nothing ran on that record. The fragment is moved to
// audit.jsonl.torn-<unix nanoseconds> as evidence, the active file is cut
// back to its last complete record, and a torn_tail record saying so joins
// the chain: the loss is recorded, never silent.
func (l *Log) recoverTorn(torn []byte) error {
	name := fmt.Sprintf("%s.torn-%d", FileName, time.Now().UnixNano())
	keep := filepath.Join(l.dir, name)
	f, err := os.OpenFile(keep, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return unavailable("save torn audit line: %w", err)
	}
	_, err = f.Write(torn)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(l.dir)
	}
	if err != nil {
		return unavailable("save torn audit line: %w", err)
	}
	l.valid = false
	if err := l.f.Truncate(l.size); err != nil {
		return unavailable("cut torn audit line: %w", err)
	}
	if err := fdatasync(l.f); err != nil {
		return unavailable("sync audit log: %w", err)
	}
	l.valid = true
	return l.write(&Record{
		Event:     EventTornTail,
		Placement: "none",
		Decision:  "deny",
		Code:      string(reason.AuditUnavailable),
		Reason: fmt.Sprintf("discarded an unfinished record of %d bytes after seq %d (a writer stopped mid-append, before anything ran on it); the bytes are kept in %s",
			len(torn), l.seq, name),
	})
}

// write appends r after the cached end of the log. Called with the lock
// held and the state valid.
func (l *Log) write(r *Record) error {
	r.Seq = l.seq + 1
	r.TS = time.Now().UTC()
	r.Prev = l.hash
	r.Hash = ""
	r.Reason = truncateReason(r.Reason)
	if r.GuardChain == nil {
		r.GuardChain = []string{}
	}
	line, hash := seal(appendBody(l.buf[:0], r))
	l.buf = line[:0]
	if len(line) > maxLineBytes {
		return unavailable("audit record of %d bytes exceeds the limit of %d", len(line), maxLineBytes)
	}
	if _, ok := scanCanonical(line[:len(line)-1]); !ok {
		_, p, detail := parseSlow(line[:len(line)-1])
		return unavailable("invalid audit record (%s): %s", p, detail)
	}
	var aw *anchorWrite
	if l.opts.Anchor != nil {
		var err error
		if aw, err = l.anchorIntent(Head{r.Seq, hash}); err != nil {
			return err
		}
		defer aw.close()
		crashPoint("intent")
	}
	if l.size > 0 && l.size+int64(len(line)) > l.opts.MaxSizeBytes {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	if n, err := l.f.Write(line); err != nil {
		l.valid = false
		if n > 0 {
			_ = l.f.Truncate(l.size) // best effort: do not leave a torn line
		}
		return unavailable("write audit log: %w", err)
	}
	if err := fdatasync(l.f); err != nil {
		l.valid = false
		return unavailable("sync audit log: %w", err)
	}
	l.size += int64(len(line))
	l.seq, l.hash = r.Seq, hash
	r.Hash = hash
	if aw != nil {
		crashPoint("record")
		return l.anchorCommit(aw, Head{r.Seq, hash})
	}
	return nil
}

// rotate renames audit.jsonl.N to .N+1 (deleting what would exceed
// MaxFiles) and audit.jsonl to .1, then starts a new active file. The chain
// state carries over: the next record's prev is the last hash of .1.
func (l *Log) rotate() error {
	files, err := ListFiles(l.dir)
	if err != nil {
		return unavailable("list audit files: %w", err)
	}
	keep := l.opts.MaxFiles - 1 // rotated files kept after this rotation
	for _, f := range files {
		if f.N >= keep {
			if err := os.Remove(filepath.Join(l.dir, f.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return unavailable("drop old audit file: %w", err)
			}
		}
	}
	for n := keep - 1; n >= 1; n-- {
		err := os.Rename(filepath.Join(l.dir, rotatedName(n)), filepath.Join(l.dir, rotatedName(n+1)))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return unavailable("rotate audit log: %w", err)
		}
	}
	if err := os.Rename(filepath.Join(l.dir, FileName), filepath.Join(l.dir, rotatedName(1))); err != nil {
		return unavailable("rotate audit log: %w", err)
	}
	if err := syncDir(l.dir); err != nil {
		return unavailable("rotate audit log: %w", err)
	}
	seq, hash := l.seq, l.hash
	if err := l.openActive(); err != nil {
		return err
	}
	l.size, l.seq, l.hash, l.valid = 0, seq, hash, true
	return nil
}

// Dir is the directory of the log.
func (l *Log) Dir() string { return l.dir }

// Close releases the log's files. Appending afterwards fails.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	err := errors.Join(l.f.Close(), l.lock.Close())
	if err != nil {
		return unavailable("close audit log: %w", err)
	}
	return nil
}
