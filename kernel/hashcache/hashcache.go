// Package hashcache remembers the SHA-256 digests of files by their identity
// and change stamps, so that a file hashed once is not read and hashed again
// while it provably has not changed: plugin binaries before every launch
// (13–20 MB, about 10 ms each), and installed package trees and the
// unpacked rootfs of sandbox images before every run.
//
// An entry records the file's identity and change stamps (device, inode,
// size, mtime, ctime) as fstat reported them on the very descriptor that was
// hashed. It is used only when the stamps of the file as it is now match
// every field: fstat of a newly opened descriptor (Sum), or the lstat of
// a tree walk that then uses the digest for that very entry
// (kernel/treehash; a regular file's lstat and fstat report the same
// inode's stamps). The kernel sets ctime to the current time on any change to a
// file's content or metadata and offers no way to set it back (short of
// changing the system clock, which needs root), and a replaced file has
// another inode, so a file that changed after it was hashed never matches.
// ctime has a coarse clock, so a change in the same tick as the hash could
// keep the stamp: entries are only recorded for files last changed at least
// Settle before hashing began, and the stamps are checked again after
// hashing.
//
// A cache is one file (0600) in agentnode's state directory. It is as
// trusted as the pins and package metadata next to it: whoever can write
// one can write the others. A missing, corrupt or unwritable cache only
// means files are hashed again.
//
// The file is read before every run that checks a tree (an image's rootfs
// holds over a thousand files), so it is a flat format that parses without
// reflection: the line "agentnode-hashcache-v1", then one record per file,
//
//	SHA256-HEX SP DEV SP INO SP SIZE SP MTIME-NS SP CTIME-NS SP PATH NUL
//
// with the numbers in decimal. A path holds no NUL, so it may hold spaces
// and newlines. A file that does not parse as a whole is no cache at all.
//
// It is in the trusted core because the checks of plugins, packages and images
// before every launch and run use it.
package hashcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/sdk/atomicfile"
)

// Settle is how long before hashing a file must have last changed for its
// digest to be recorded (a variable for tests only).
var Settle = 2 * time.Second

// Stamp identifies one version of a file.
type Stamp struct {
	Dev     uint64
	Ino     uint64
	Size    int64
	MtimeNS int64
	CtimeNS int64
}

// Entry is one cached digest.
type Entry struct {
	Stamp
	SHA256 string // hex
}

// header starts every cache file; it names the format's version.
const header = "agentnode-hashcache-v1\n"

// Cache is the digest cache kept in one file. Its methods are safe for
// concurrent use; a nil *Cache caches nothing.
type Cache struct {
	path string

	mu     sync.Mutex
	loaded bool
	m      map[string]Entry
	dirty  bool
}

// Open returns the cache kept in the file at path. Nothing is read before
// the first lookup.
func Open(path string) *Cache { return &Cache{path: path} }

// shared holds the process's caches by file (Shared).
var shared sync.Map

// Shared returns the process's one Cache for the file at path, so that a
// long-lived process (mcp serve) parses the file once, not before every
// run. Its entries stay exact: each is used only while the file's stamps
// match, and Flush merges what other processes wrote.
func Shared(path string) *Cache {
	c, _ := shared.LoadOrStore(path, Open(path))
	return c.(*Cache)
}

// Path is the cache's file.
func (c *Cache) Path() string { return c.path }

// load reads the file once; c.mu is held.
func (c *Cache) load() {
	if c.loaded {
		return
	}
	c.loaded = true
	c.m = Read(c.path)
	if c.m == nil {
		c.m = map[string]Entry{}
	}
}

// maxFileSize bounds the cache file read (an entry is ~150 bytes).
const maxFileSize = 64 << 20

// Read returns the entries of the cache file at path by file name; nil
// when it cannot be read.
func Read(path string) map[string]Entry {
	// A state file: no symlink, no FIFO or device (kernel/bounded).
	data, err := bounded.ReadFile(path, maxFileSize)
	if err != nil {
		return nil
	}
	m, ok := parse(string(data))
	if !ok {
		return nil
	}
	return m
}

// parse decodes a cache file; ok is false unless all of it is well formed.
// The names and digests share data's memory.
func parse(data string) (m map[string]Entry, ok bool) {
	rest, found := strings.CutPrefix(data, header)
	if !found {
		return nil, false
	}
	m = make(map[string]Entry, strings.Count(rest, "\x00"))
	for rest != "" {
		var rec string
		if rec, rest, found = strings.Cut(rest, "\x00"); !found {
			return nil, false
		}
		var f [6]string
		for i := range f {
			if f[i], rec, found = strings.Cut(rec, " "); !found {
				return nil, false
			}
		}
		name := rec
		var e Entry
		var errs [5]error
		e.SHA256 = f[0]
		e.Dev, errs[0] = strconv.ParseUint(f[1], 10, 64)
		e.Ino, errs[1] = strconv.ParseUint(f[2], 10, 64)
		e.Size, errs[2] = strconv.ParseInt(f[3], 10, 64)
		e.MtimeNS, errs[3] = strconv.ParseInt(f[4], 10, 64)
		e.CtimeNS, errs[4] = strconv.ParseInt(f[5], 10, 64)
		if name == "" || len(e.SHA256) != 2*sha256.Size || errs != [5]error{} {
			return nil, false
		}
		if _, dup := m[name]; dup {
			return nil, false
		}
		m[name] = e
	}
	return m, true
}

// format encodes entries as a cache file, in name order.
func format(m map[string]Entry) ([]byte, error) {
	names := make([]string, 0, len(m))
	size := len(header)
	for name, e := range m {
		if name == "" || strings.IndexByte(name, 0) >= 0 || len(e.SHA256) != 2*sha256.Size {
			return nil, fmt.Errorf("hashcache: entry %q cannot be written", name)
		}
		names = append(names, name)
		size += len(name) + 2*sha256.Size + 5*21 + 1
	}
	slices.Sort(names)
	b := make([]byte, 0, size)
	b = append(b, header...)
	for _, name := range names {
		e := m[name]
		b = append(b, e.SHA256...)
		b = append(b, ' ')
		b = strconv.AppendUint(b, e.Dev, 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, e.Ino, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.Size, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.MtimeNS, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.CtimeNS, 10)
		b = append(b, ' ')
		b = append(b, name...)
		b = append(b, 0)
	}
	return b, nil
}

// Lookup returns the digest recorded for the file name with stamp st.
func (c *Cache) Lookup(name string, st Stamp) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.load()
	e, ok := c.m[name]
	if !ok || e.Stamp != st {
		return nil, false
	}
	sum, err := hex.DecodeString(e.SHA256)
	if err != nil || len(sum) != sha256.Size {
		return nil, false
	}
	return sum, true
}

// Add records the digest of the file name, hashed starting at hashedAt with
// stamp before and stamp after, in memory (Flush writes it). It records
// nothing unless the file was unchanged while it was hashed and had settled
// before.
func (c *Cache) Add(name string, before, after Stamp, hashedAt time.Time, sum []byte) {
	if c == nil || before != after || hashedAt.UnixNano()-before.CtimeNS < int64(Settle) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.load()
	c.m[name] = Entry{Stamp: before, SHA256: hex.EncodeToString(sum)}
	c.dirty = true
}

// Flush writes the cache if Add changed it, keeping only files that still
// exist. Failures are ignored: an entry not written only costs a hash.
func (c *Cache) Flush() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return
	}
	c.dirty = false
	// Entries written meanwhile by another process are merged in, so that
	// two processes hashing different files do not undo each other.
	for name, e := range Read(c.path) {
		if _, ok := c.m[name]; !ok {
			c.m[name] = e
		}
	}
	for name := range c.m {
		if _, err := os.Lstat(name); err != nil {
			delete(c.m, name)
		}
	}
	_ = Write(c.path, c.m)
}

// Write replaces the cache file at path with the entries m (0600, its
// directory created 0700 if missing). Flush writes through it.
func Write(path string, m map[string]Entry) error {
	data, err := format(m)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	// No fsync: losing the cache in a crash only costs a hash.
	return atomicfile.WriteFile(path, data, 0o600, atomicfile.NoSync)
}

// Sum returns the SHA-256 of the open regular file f, known by name: from
// the cache when f's stamps match an entry, else by reading f (from its
// current offset, which must be the start), in which case hashed is true
// and the digest is added to the cache (not flushed).
func (c *Cache) Sum(f *os.File, name string) (sum []byte, hashed bool, err error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	before, stamped := StampOf(fi)
	if stamped {
		if sum, ok := c.Lookup(name, before); ok {
			return sum, false, nil
		}
	}
	hashedAt := time.Now()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, true, fmt.Errorf("read %s: %w", name, err)
	}
	sum = h.Sum(nil)
	if stamped {
		if fi2, err := f.Stat(); err == nil {
			if after, ok := StampOf(fi2); ok {
				c.Add(name, before, after, hashedAt, sum)
			}
		}
	}
	return sum, true, nil
}

// Matches reports whether the cache vouches that the file name with stamp
// st has the digest want.
func (c *Cache) Matches(name string, st Stamp, want []byte) bool {
	sum, ok := c.Lookup(name, st)
	return ok && bytes.Equal(sum, want)
}
