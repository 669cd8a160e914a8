// Package treehash is agentnode's one directory-tree hasher: one walker
// and one record encoder for the two digests the project records, which
// differ by design and so stay two formats (Format):
//
//   - Content, a package's content hash (specs/store.md, "Content hash"):
//     what a package is, wherever and by whomever it is installed. It is
//     recorded in installed packages, lockfiles and attestations made on
//     other machines, so it hashes no owner, time or permission bit but
//     the executable one.
//   - Rootfs, the tree hash of an unpacked sandbox image (specs/image.md):
//     whether the rootfs on this machine is still exactly what was
//     unpacked. The container runs it as it is, so owners, groups and the
//     setuid, setgid and sticky bits are part of it.
//
// Both walk the tree through an os.Root without following symlinks; a
// regular file is hashed only if it is still the file the walk listed.
// Changing either format changes recorded digests (test vectors in
// treehash_test.go hold them).
//
// It is in the trusted core because the checks of packages and images before
// every run are these hashes.
package treehash

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"github.com/agentnode/agentnode/kernel/hashcache"
)

// Format is one of the two digests.
type Format int

const (
	// Content is SHA-256 over the header "agentnode-content-v1\x00" and one
	// record per entry below the root, in byte order of the relative path:
	// kind NUL path NUL value NUL, where kind is d (value empty), f (value
	// "x" or "-" for the executable bit, then the hex SHA-256 of the
	// content) or l (value the link target).
	Content Format = iota + 1
	// Rootfs is SHA-256 over one record per entry, the root (".")
	// included, in fs.WalkDir order: path NUL kind NUL mode NUL uid NUL
	// gid NUL value NUL, where mode is the octal permission, setuid,
	// setgid and sticky bits and value is "size:hex SHA-256" for a file,
	// the target for a symlink, empty for a directory.
	Rootfs
)

// contentHeader starts every Content hash input; it names the format
// version (specs/store.md).
const contentHeader = "agentnode-content-v1\x00"

// Options are the caller's parts of a hash.
type Options struct {
	// Check, when set, is called for every entry but the root, in walk
	// order, before anything is hashed (the store refuses special files
	// and escaping symlinks there); an error stops the hash.
	Check func(root *os.Root, p string, info fs.FileInfo) error
	// Cache, when set, supplies the digests of regular files that
	// provably did not change since they were last hashed
	// (kernel/hashcache: the same device, inode, size, mtime and ctime),
	// and learns the digests of the files Hash reads; Hash flushes it.
	// Everything else (names, kinds, modes, owners, symlink targets) is
	// read every time. The cache knows files by absolute path.
	Cache *hashcache.Cache
	// Skip, when set, is called for every entry but the root before
	// Check; an entry it returns true for is left out of the hash, with
	// everything below it when it is a directory (the store hashes a
	// package's installed dependencies apart from the package).
	Skip func(p string, info fs.FileInfo) bool
}

type entry struct {
	path string // slash-separated, relative; "." is the root
	info fs.FileInfo
}

// Hash returns "sha256:<hex>", the digest of the tree at dir in format f.
// A missing dir is an error wrapping fs.ErrNotExist; one that is not a
// directory, or holds anything but directories, regular files and
// symlinks, is an error.
func Hash(dir string, f Format, opt Options) (string, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	var abs string
	if opt.Cache != nil {
		if abs, err = filepath.Abs(dir); err != nil {
			return "", err
		}
		defer opt.Cache.Flush()
	}
	var entries []entry
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if p != "." && opt.Skip != nil && opt.Skip(p, info) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if p != "." && opt.Check != nil {
			if err := opt.Check(root, p, info); err != nil {
				return err
			}
		}
		entries = append(entries, entry{path: p, info: info})
		return nil
	})
	if err != nil {
		return "", err
	}
	h := sha256.New()
	switch f {
	case Content:
		io.WriteString(h, contentHeader)
		entries = entries[1:] // the root
		slices.SortFunc(entries, func(a, b entry) int { return bytes.Compare([]byte(a.path), []byte(b.path)) })
	case Rootfs:
	default:
		return "", fmt.Errorf("treehash: unknown format %d", f)
	}
	buf := make([]byte, 64<<10)
	var rec []byte // one record, written to h at once
	for _, e := range entries {
		var kind, value string
		m := e.info.Mode()
		switch {
		case m.IsDir():
			kind = "d"
		case m.IsRegular():
			kind = "f"
			sum, size, err := sumFile(root, e, opt.Cache, abs, buf)
			if err != nil {
				return "", err
			}
			if f == Content {
				value = execFlag(m) + hex.EncodeToString(sum)
			} else {
				value = strconv.FormatInt(size, 10) + ":" + hex.EncodeToString(sum)
			}
		case m&fs.ModeSymlink != 0:
			kind = "l"
			if value, err = root.Readlink(filepath.FromSlash(e.path)); err != nil {
				return "", fmt.Errorf("read symlink %s: %w", e.path, err)
			}
		default:
			return "", fmt.Errorf("%s is a special file (%s)", e.path, m.Type())
		}
		if f == Content {
			rec = writeRecord(h, rec, kind, e.path, value)
			continue
		}
		st, ok := e.info.Sys().(*syscall.Stat_t)
		if !ok {
			return "", fmt.Errorf("%s: no ownership information", e.path)
		}
		rec = rec[:0]
		rec = append(append(rec, e.path...), 0)
		rec = append(append(rec, kind...), 0)
		rec = append(strconv.AppendUint(rec, uint64(st.Mode)&0o7777, 8), 0)
		rec = append(strconv.AppendUint(rec, uint64(st.Uid), 10), 0)
		rec = append(strconv.AppendUint(rec, uint64(st.Gid), 10), 0)
		rec = append(append(rec, value...), 0)
		h.Write(rec)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// writeRecord writes each field NUL-terminated (none can contain NUL) in
// one write, built in rec, which it returns for reuse: one small write per
// field costs more than the hashing itself on a tree of thousands of
// entries.
func writeRecord(h hash.Hash, rec []byte, fields ...string) []byte {
	rec = rec[:0]
	for _, s := range fields {
		rec = append(append(rec, s...), 0)
	}
	h.Write(rec)
	return rec
}

func execFlag(m fs.FileMode) string {
	if m.Perm()&0o111 != 0 {
		return "x"
	}
	return "-"
}

// sumFile hashes the regular file e, refusing anything that is not the
// file the walk listed (a symlink or another file put in its place). It
// returns the digest and the size. With a cache, the file's digest is
// taken from it when the stamps the walk read (lstat, no descriptor
// needed) match an entry, and learned from it otherwise; abs is the
// absolute path of the root.
func sumFile(root *os.Root, e entry, cache *hashcache.Cache, abs string, buf []byte) ([]byte, int64, error) {
	var name string
	if cache != nil {
		name = filepath.Join(abs, filepath.FromSlash(e.path))
		if st, ok := hashcache.StampOf(e.info); ok {
			if sum, ok := cache.Lookup(name, st); ok {
				return sum, e.info.Size(), nil
			}
		}
	}
	f, err := root.OpenFile(filepath.FromSlash(e.path), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() || !os.SameFile(fi, e.info) {
		return nil, 0, fmt.Errorf("%s changed while it was hashed", e.path)
	}
	if cache != nil {
		s, _, err := cache.Sum(f, name)
		return s, fi.Size(), err
	}
	h := sha256.New()
	n, err := io.CopyBuffer(h, f, buf)
	if err != nil {
		return nil, 0, err
	}
	return h.Sum(nil), n, nil
}
