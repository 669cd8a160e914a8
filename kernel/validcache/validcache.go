// Package validcache remembers which exact documents this very agentnode binary
// has already validated, so that a document validated once (config.json, an
// installed package's agentnode.yaml) is not validated against its JSON
// Schema again on every run.
//
// Compiling a JSON Schema (which includes checking it against the draft
// 2020-12 meta-schema) and validating against it costs several milliseconds
// per document, a large share of a cold `agentnode run`. The result depends
// only on the document's bytes and on the validating code, so a cache keyed
// by both is exact:
//
//	key = SHA-256(binary stamp, kind, len(part), part, ...)
//
// The binary stamp identifies the running executable file (device, inode,
// size, mtime and ctime of /proc/self/exe): any rebuild or upgrade of
// agentnode changes it, so a verdict of older code (an older schema, older
// rules) never counts. A verdict is a file named by the key in the cache
// directory ($AGENTNODE_HOME/state/valid): empty (Valid is one stat), or
// holding what the validation derived from the document alone (Keep: a
// manifest's conversion from YAML to JSON, the costliest step of a load).
//
// Only "valid" is remembered, never "invalid": an invalid document is
// validated in full every time, so its error message is always complete and
// current. The cache is as trusted as the files it vouches for: whoever can
// write $AGENTNODE_HOME/state can write config.json too. A missing, unreadable
// or unwritable cache only means documents are validated again.
//
// It is in the trusted core because it decides when a config or a manifest need
// not be validated again.
package validcache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	"github.com/agentnode/agentnode/kernel/bounded"
)

// MaxEntries bounds the cache directory: when Remember finds more entries,
// it removes the oldest ones down to half. It holds a verdict or two for
// each of thousands of installed packages: a smaller cache than the set
// listed together is evicted as it is read, and validates every manifest.
const MaxEntries = 4096

// Cache is a verdict cache in one directory. The zero value and a nil
// *Cache remember nothing.
type Cache struct {
	dir string
}

// Open returns the cache kept in dir (created on first Remember, 0700).
func Open(dir string) *Cache { return &Cache{dir: dir} }

// exeStamp identifies the running binary; empty if it cannot be found, and
// then nothing is cached.
var exeStamp = sync.OnceValue(func() []byte {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		return nil
	}
	b := make([]byte, 0, 48)
	for _, v := range []uint64{st.Dev, st.Ino, uint64(st.Size),
		uint64(st.Mtim.Sec), uint64(st.Mtim.Nsec), uint64(st.Ctim.Sec), uint64(st.Ctim.Nsec)} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
})

// key is the file name of the verdict for kind over parts.
func key(kind string, parts [][]byte) string {
	h := sha256.New()
	h.Write(exeStamp())
	var n [8]byte
	for _, p := range append([][]byte{[]byte(kind)}, parts...) {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// file is the verdict file for kind over parts; "" for a cache that
// remembers nothing or when the binary cannot be identified.
func (c *Cache) file(kind string, parts [][]byte) string {
	if c == nil || c.dir == "" || exeStamp() == nil {
		return ""
	}
	return filepath.Join(c.dir, key(kind, parts))
}

// Valid reports whether this binary validated exactly parts as kind before
// and found them valid.
func (c *Cache) Valid(kind string, parts ...[]byte) bool {
	f := c.file(kind, parts)
	fi, err := os.Lstat(f)
	return f != "" && err == nil && fi.Mode().IsRegular()
}

// MaxKept bounds what Keep stores with a verdict.
const MaxKept = 16 << 20

// Kept is Valid, and also returns what Keep stored with the verdict (empty
// after Remember). The verdict is read like any file agentnode did not
// write itself (kernel/bounded): a FIFO or anything else but a regular file
// of at most MaxKept bytes is no verdict.
func (c *Cache) Kept(kind string, parts ...[]byte) ([]byte, bool) {
	f := c.file(kind, parts)
	if f == "" {
		return nil, false
	}
	value, err := bounded.ReadFile(f, MaxKept)
	return value, err == nil
}

// Remember records that parts are valid as kind. Failures are ignored: a
// verdict not remembered only costs a validation later.
func (c *Cache) Remember(kind string, parts ...[]byte) { c.Keep(kind, nil, parts...) }

// Keep is Remember, storing value (what the validation derived from parts
// alone, at most MaxKept bytes) with the verdict for Kept. The verdict
// appears whole or not at all (written aside, then renamed); an entry that
// is not a regular file (a FIFO put there) is left as it is, no verdict.
func (c *Cache) Keep(kind string, value []byte, parts ...[]byte) {
	k := c.file(kind, parts)
	if fi, err := os.Lstat(k); k == "" || len(value) > MaxKept || (err == nil && !fi.Mode().IsRegular()) || os.MkdirAll(c.dir, 0o700) != nil {
		return
	}
	f, err := os.CreateTemp(c.dir, ".new-")
	if err != nil {
		return
	}
	_, err = f.Write(value)
	if cerr := f.Close(); err != nil || cerr != nil || os.Rename(f.Name(), k) != nil {
		_ = os.Remove(f.Name())
		return
	}
	c.prune(filepath.Base(k))
}

// prune removes the oldest entries once there are more than MaxEntries,
// never keep (the verdict just recorded: file times have a coarse clock, so
// many entries may look equally old).
func (c *Cache) prune(keep string) {
	ents, err := os.ReadDir(c.dir)
	if err != nil || len(ents) <= MaxEntries {
		return
	}
	type aged struct {
		name string
		mod  int64
	}
	all := make([]aged, 0, len(ents))
	for _, e := range ents {
		if e.Name() == keep {
			continue
		}
		if fi, err := e.Info(); err == nil {
			all = append(all, aged{e.Name(), fi.ModTime().UnixNano()})
		}
	}
	slices.SortFunc(all, func(a, b aged) int {
		switch {
		case a.mod < b.mod:
			return -1
		case a.mod > b.mod:
			return 1
		}
		return 0
	})
	for _, a := range all[:max(0, len(all)-MaxEntries/2)] {
		_ = os.Remove(filepath.Join(c.dir, a.name))
	}
}
