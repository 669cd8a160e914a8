package ratelimit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/atomicfile"
)

// DefaultLockTimeout bounds the wait for another process's lock on the
// state file (further bounded by the caller's context deadline).
const DefaultLockTimeout = 5 * time.Second

// The file's layout: bucket "meta" holds "format" = formatValue; bucket
// "windows" maps a package id to its window (see encodeWindow).
var (
	metaBucket    = []byte("meta")
	formatKey     = []byte("format")
	formatValue   = []byte("agentnode-ratelimit/1")
	windowsBucket = []byte("windows")
	castagnoli    = crc32.MakeTable(crc32.Castagnoli)
)

// Errors wrapped (with reason code rate_limited) by Admit and Check.
var (
	// ErrExceeded: a window is full.
	ErrExceeded = errors.New("rate limit exceeded")
	// ErrCorrupt: the state file is damaged; it is left as it is.
	ErrCorrupt = errors.New("rate-limit state is corrupt")
	// ErrUnavailable: the state file cannot be opened or locked.
	ErrUnavailable = errors.New("rate-limit state is unavailable")
)

// errEmptyFile marks a zero-length state file. bbolt would silently
// initialise it; agentnode never creates one (see create), so it is damage.
var errEmptyFile = errors.New("the file is empty")

// Options configure a Store.
type Options struct {
	// Now is the clock (default time.Now).
	Now func() time.Time
	// LockTimeout bounds the wait for the file lock (default
	// DefaultLockTimeout).
	LockTimeout time.Duration
}

// Store is the rate-limit state file of one AGENTNODE_HOME. It holds no
// open file between calls; every call opens, locks, decides and closes.
type Store struct {
	path        string
	now         func() time.Time
	lockTimeout time.Duration
}

// New returns the store kept in path (home.RateLimitPath). Nothing is
// opened or created until the first Admit.
func New(path string, opts Options) *Store {
	s := &Store{path: path, now: opts.Now, lockTimeout: opts.LockTimeout}
	if s.now == nil {
		s.now = time.Now
	}
	if s.lockTimeout <= 0 {
		s.lockTimeout = DefaultLockTimeout
	}
	return s
}

// Admit decides one call of pkg under lim and, if every window has room,
// records it — both in one transaction under the file's exclusive lock.
// It returns nil when the call is admitted, an error wrapping ErrExceeded
// when a window is full (naming the window), and an error wrapping
// ErrCorrupt or ErrUnavailable when the state cannot be trusted; every
// error carries reason code rate_limited (config_invalid for a bad lim).
// The state file and its directory are created on first use.
func (s *Store) Admit(ctx context.Context, pkg string, lim Limit) error {
	return s.run(ctx, pkg, lim, true)
}

// Check decides like Admit but records nothing and creates nothing (a
// missing state file means every window is empty). It is what a dry run
// uses.
func (s *Store) Check(ctx context.Context, pkg string, lim Limit) error {
	return s.run(ctx, pkg, lim, false)
}

func (s *Store) run(ctx context.Context, pkg string, lim Limit, record bool) (err error) {
	if pkg == "" {
		return reason.New(reason.ConfigInvalid, "rate limit: empty package id")
	}
	if err := lim.Validate(); err != nil {
		return reason.New(reason.ConfigInvalid, "guard.rate_limits.%s: %w", pkg, err)
	}
	if err := ctx.Err(); err != nil {
		return reason.New(reason.RateLimited, "rate limit for %s: %w", pkg, err)
	}
	// A damaged file can make bbolt fault on its memory map or panic on a
	// bad page; both become ErrCorrupt, never a crash and never an admit.
	if err := poisonedErr(s.path); err != nil {
		return err
	}
	var opened []*os.File
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = s.corrupt(fmt.Errorf("reading it failed: %v", p))
			for _, f := range opened {
				poison(f, err)
				_ = f.Close()
			}
		}
	}()
	openFile := func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := openExisting(name, flag, perm)
		if f != nil {
			opened = append(opened, f)
		}
		return f, err
	}

	release, err := s.queue(ctx)
	if err != nil {
		return err
	}
	defer release()
	db, err := s.open(s.waitFor(ctx), !record, openFile)
	if err != nil {
		if !record && errors.Is(err, fs.ErrNotExist) {
			return nil // nothing recorded yet
		}
		return err
	}
	defer db.Close()

	now := s.now().UnixNano()
	decide := func(tx *bolt.Tx) error {
		windows, err := s.windows(tx)
		if err != nil {
			return err
		}
		ts, err := s.sweep(windows, pkg, now, record)
		if err != nil {
			return err
		}
		if err := exceeded(pkg, lim, ts, now); err != nil {
			return err
		}
		if !record {
			return nil
		}
		return windows.Put([]byte(pkg), encodeWindow(pkg, admit(ts, now, lim.PerHour)))
	}
	if record {
		err = db.Update(decide)
	} else {
		err = db.View(decide)
	}
	if err != nil && reason.CodeOf(err) == "" {
		// A failed write or fsync of the commit: the call is not admitted.
		err = reason.New(reason.RateLimited, "%w: %s: %w", ErrUnavailable, s.path, err)
	}
	return err
}

// queues holds, per state file, this process's turn to open it (a channel
// with room for one). Concurrent calls of one process (mcp serve) queue
// here, each woken as the last one is done, instead of at bbolt's file
// lock, which retries every 50 ms; other processes still meet that lock.
var queues sync.Map

// queue waits for this process's turn at the state file (as long as the
// file lock would be waited for) and returns its release.
func (s *Store) queue(ctx context.Context) (func(), error) {
	q, _ := queues.LoadOrStore(s.path, make(chan struct{}, 1))
	turn := q.(chan struct{})
	wait := s.waitFor(ctx)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case turn <- struct{}{}:
		return func() { <-turn }, nil
	case <-t.C:
	case <-ctx.Done():
	}
	return nil, reason.New(reason.RateLimited, "%w: %s is busy with other calls of this process (waited %s)",
		ErrUnavailable, s.path, wait.Round(time.Millisecond))
}

// poisoned remembers state files (by device and inode) on which bbolt
// faulted or panicked in this process. bbolt's memory map of such a file
// cannot be released, and it keeps the file's flock, so a second attempt
// would only time out; instead the same corruption error is returned at
// once. A new file at the path (after the user removed the damaged one) is
// another inode and is used normally.
var poisoned sync.Map // fileID → error

type fileID struct{ dev, ino uint64 }

func idOf(fi os.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, true
}

func poison(f *os.File, err error) {
	if fi, serr := f.Stat(); serr == nil {
		if id, ok := idOf(fi); ok {
			poisoned.Store(id, err)
		}
	}
}

func poisonedErr(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	if id, ok := idOf(fi); ok {
		if e, ok := poisoned.Load(id); ok {
			return e.(error)
		}
	}
	return nil
}

// waitFor is the lock timeout: LockTimeout, but leaving the caller's
// deadline some room to report. bbolt treats 0 as "wait forever", so the
// result is never 0.
func (s *Store) waitFor(ctx context.Context) time.Duration {
	t := s.lockTimeout
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl) - 100*time.Millisecond; left < t {
			t = left
		}
	}
	return max(t, time.Millisecond)
}

// open opens the existing state file with openFile (openExisting), creating
// it first (read-write only) when it does not exist.
func (s *Store) open(timeout time.Duration, readOnly bool, openFile func(string, int, os.FileMode) (*os.File, error)) (*bolt.DB, error) {
	opts := &bolt.Options{Timeout: timeout, ReadOnly: readOnly, OpenFile: openFile}
	for range 3 {
		db, err := bolt.Open(s.path, 0o600, opts)
		switch {
		case err == nil:
			return db, nil
		case errors.Is(err, fs.ErrNotExist) && readOnly:
			return nil, err
		case errors.Is(err, fs.ErrNotExist):
			if err := s.create(); err != nil {
				return nil, err
			}
			continue
		case errors.Is(err, berrors.ErrTimeout):
			return nil, reason.New(reason.RateLimited, "%w: %s is locked by another agentnode process (waited %s)",
				ErrUnavailable, s.path, timeout.Round(time.Millisecond))
		}
		var pe *fs.PathError
		if errors.As(err, &pe) && !errors.Is(err, errEmptyFile) {
			return nil, reason.New(reason.RateLimited, "%w: %v; it must be a regular file this user can read and write",
				ErrUnavailable, err)
		}
		return nil, s.corrupt(err)
	}
	return nil, reason.New(reason.RateLimited, "%w: %s keeps disappearing", ErrUnavailable, s.path)
}

// openExisting is bbolt's OpenFile: it never creates the file (create does,
// atomically) and refuses anything but a non-empty regular file.
func openExisting(name string, flag int, perm os.FileMode) (*os.File, error) {
	// O_NOFOLLOW|O_NONBLOCK, then fstat (kernel/bounded): a symlink,
	// FIFO or device there fails at once.
	f, err := bounded.Open(name, flag&^os.O_CREATE, perm)
	if err != nil {
		if errors.Is(err, bounded.ErrNotRegular) {
			err = &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case fi.Size() == 0:
		err = &fs.PathError{Op: "open", Path: name, Err: errEmptyFile}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// create makes a new state file atomically (sdk/atomicfile, Exclusive): a
// complete bbolt file with its buckets and format marker is written under a
// temporary name, then linked into place. link, unlike rename, fails if the file exists, so a file
// another process created (or a damaged one) is never replaced.
func (s *Store) create() error {
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return reason.New(reason.RateLimited, "%w: create %s: %w", ErrUnavailable, dir, err)
	}
	tmp, err := atomicfile.New(s.path, 0o600, atomicfile.Exclusive)
	if err != nil {
		return reason.New(reason.RateLimited, "%w: %w", ErrUnavailable, err)
	}
	defer tmp.Abort()
	name := tmp.Name()
	db, err := bolt.Open(name, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return reason.New(reason.RateLimited, "%w: initialise %s: %w", ErrUnavailable, name, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(metaBucket)
		if err != nil {
			return err
		}
		if err := meta.Put(formatKey, formatValue); err != nil {
			return err
		}
		_, err = tx.CreateBucket(windowsBucket)
		return err
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return reason.New(reason.RateLimited, "%w: initialise %s: %w", ErrUnavailable, name, err)
	}
	if err := tmp.Commit(); err != nil && !errors.Is(err, fs.ErrExist) {
		return reason.New(reason.RateLimited, "%w: %w", ErrUnavailable, err)
	}
	return nil
}

// windows checks the file's shape and returns the windows bucket.
func (s *Store) windows(tx *bolt.Tx) (*bolt.Bucket, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return nil, reason.New(reason.RateLimited, "%w: %w", ErrUnavailable, err)
	}
	if fi.Size() < tx.Size() {
		return nil, s.corrupt(fmt.Errorf("it is truncated (%d bytes, its pages need %d)", fi.Size(), tx.Size()))
	}
	meta := tx.Bucket(metaBucket)
	if meta == nil {
		return nil, s.corrupt(errors.New("it has no format marker (not an agentnode rate-limit file)"))
	}
	if f := meta.Get(formatKey); string(f) != string(formatValue) {
		return nil, s.corrupt(fmt.Errorf("unknown format %q, want %q", f, formatValue))
	}
	b := tx.Bucket(windowsBucket)
	if b == nil {
		return nil, s.corrupt(errors.New("it has no windows bucket"))
	}
	return b, nil
}

// sweep validates every package's window, drops windows that have been
// idle for an hour (when writing) and returns pkg's timestamps of the last
// hour. Any malformed window is corruption of the whole file.
func (s *Store) sweep(b *bolt.Bucket, pkg string, now int64, write bool) ([]int64, error) {
	cutoff := now - int64(time.Hour)
	var mine []int64
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		ts, err := decodeWindow(string(k), v)
		if err != nil {
			return nil, s.corrupt(fmt.Errorf("window of %q: %w", k, err))
		}
		if string(k) == pkg {
			mine = prune(ts, cutoff)
			continue
		}
		if write && ts[len(ts)-1] <= cutoff {
			if err := c.Delete(); err != nil {
				return nil, err
			}
		}
	}
	return mine, nil
}

func (s *Store) corrupt(cause error) error {
	return reason.New(reason.RateLimited,
		"%w: %s: %v. agentnode refuses every run until it is dealt with and never resets it by itself: "+
			"keep a copy if you want to inspect it, then remove it (rm %s) to reset all rate-limit windows",
		ErrCorrupt, s.path, cause, s.path)
}

// exceeded returns an ErrExceeded error naming the window that stays full
// longest, or nil if every window has room for one more call.
func exceeded(pkg string, lim Limit, ts []int64, now int64) error {
	var (
		full  *Window
		retry time.Duration
	)
	windows := lim.Windows()
	for i := range windows {
		w := &windows[i]
		start := now - int64(w.Span)
		first := sort.Search(len(ts), func(j int) bool { return ts[j] > start })
		if int64(len(ts)-first) < w.Max {
			continue
		}
		// Room returns when the Max-th newest call leaves the window.
		r := time.Duration(ts[len(ts)-int(w.Max)] + int64(w.Span) - now)
		if full == nil || r > retry {
			full, retry = w, r
		}
	}
	if full == nil {
		return nil
	}
	return reason.New(reason.RateLimited, "%w: %d per %s for %s (retry in %s)",
		ErrExceeded, full.Max, full.Unit, pkg, ceilSecond(retry))
}

func ceilSecond(d time.Duration) time.Duration {
	return max(time.Second, (d + time.Second - 1).Truncate(time.Second))
}

// prune drops timestamps at or before cutoff (ts is sorted).
func prune(ts []int64, cutoff int64) []int64 {
	i := sort.Search(len(ts), func(j int) bool { return ts[j] > cutoff })
	return ts[i:]
}

// admit inserts now in order (the clock may have stepped back) and keeps at
// most perHour timestamps, dropping the oldest.
func admit(ts []int64, now int64, perHour int64) []int64 {
	i := sort.Search(len(ts), func(j int) bool { return ts[j] > now })
	ts = append(ts, 0)
	copy(ts[i+1:], ts[i:])
	ts[i] = now
	if n := int64(len(ts)); n > perHour {
		ts = ts[n-perHour:]
	}
	return ts
}

// encodeWindow: the timestamps (Unix nanoseconds, big-endian uint64,
// ascending) followed by the CRC-32C of the package id and those bytes, so
// a damaged or misplaced value is detected.
func encodeWindow(pkg string, ts []int64) []byte {
	b := make([]byte, 8*len(ts), 8*len(ts)+4)
	for i, t := range ts {
		binary.BigEndian.PutUint64(b[8*i:], uint64(t))
	}
	return binary.BigEndian.AppendUint32(b, checksum(pkg, b))
}

func decodeWindow(pkg string, v []byte) ([]int64, error) {
	if len(v) < 12 || (len(v)-4)%8 != 0 {
		return nil, fmt.Errorf("%d bytes is not a whole number of timestamps plus a checksum", len(v))
	}
	data := v[:len(v)-4]
	if binary.BigEndian.Uint32(v[len(v)-4:]) != checksum(pkg, data) {
		return nil, errors.New("checksum mismatch")
	}
	ts := make([]int64, len(data)/8, len(data)/8+1)
	for i := range ts {
		ts[i] = int64(binary.BigEndian.Uint64(data[8*i:]))
		if ts[i] <= 0 || (i > 0 && ts[i] < ts[i-1]) {
			return nil, fmt.Errorf("timestamp %d is out of order", i)
		}
	}
	return ts, nil
}

func checksum(pkg string, data []byte) uint32 {
	h := crc32.Update(0, castagnoli, []byte(pkg))
	return crc32.Update(h, castagnoli, data)
}
