package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/agentnode/agentnode/kernel/bounded"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/agentnode/agentnode/kernel/hashcache"
)

// hashHeader starts every content hash input; it names the format version
// (specs/store.md).
const hashHeader = "agentnode-content-v1\x00"

// entry is one element of a package tree.
type entry struct {
	path string      // relative, slash-separated
	mode fs.FileMode // from Lstat
}

// ContentHash returns "sha256:<hex>", the content hash of the tree at dir
// as defined in specs/store.md: SHA-256 over a header and one record per
// entry in byte order of the relative path, each record
// kind NUL path NUL value NUL, where kind is d (directory, empty value),
// f (regular file, value "x" or "-" for the executable bit followed by the
// hex SHA-256 of the content) or l (symlink, value the link target).
// Ownership, times and other permission bits are not hashed. Special files,
// absolute symlinks and symlinks that resolve outside the tree (or nowhere)
// are errors.
func ContentHash(dir string) (string, error) { return contentHash(dir, nil) }

// contentHash is ContentHash taking the digests of files that provably did
// not change since they were last hashed from cache (kernel/hashcache),
// when cache is not nil. The tree itself (names, kinds, modes, symlink
// targets) is read every time.
func contentHash(dir string, cache *hashcache.Cache) (string, error) {
	entries, root, err := scanTree(dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	var abs string // the cache knows files by absolute path
	if cache != nil {
		if abs, err = filepath.Abs(dir); err != nil {
			cache = nil
		}
		defer cache.Flush()
	}
	h := sha256.New()
	io.WriteString(h, hashHeader)
	for _, e := range entries {
		var kind, value string
		switch {
		case e.mode.IsDir():
			kind = "d"
		case e.mode.IsRegular():
			sum, err := fileSHA256(root, e.path, cache, abs)
			if err != nil {
				return "", err
			}
			kind, value = "f", execFlag(e.mode)+sum
		case e.mode&fs.ModeSymlink != 0:
			target, err := root.Readlink(filepath.FromSlash(e.path))
			if err != nil {
				return "", fmt.Errorf("read symlink %s: %w", e.path, err)
			}
			kind, value = "l", target
		}
		writeRecord(h, kind, e.path, value)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func writeRecord(h hash.Hash, kind, p, value string) {
	for _, s := range []string{kind, p, value} {
		io.WriteString(h, s)
		h.Write([]byte{0})
	}
}

func execFlag(m fs.FileMode) string {
	if m.Perm()&0o111 != 0 {
		return "x"
	}
	return "-"
}

// scanTree lists the tree at dir (not following symlinks), sorted by path,
// and checks that it holds only directories, regular files and relative
// symlinks that resolve inside the tree. The returned root is open on dir.
func scanTree(dir string) ([]entry, *os.Root, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, nil, err
	}
	if !fi.IsDir() {
		return nil, nil, fmt.Errorf("%s is not a directory", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	var entries []entry
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		m := info.Mode()
		switch {
		case m.IsDir(), m.IsRegular():
		case m&fs.ModeSymlink != 0:
			if err := checkSymlink(root, p); err != nil {
				return err
			}
		default:
			return refused(ErrSpecialFile, fmt.Errorf("%s: %s is not allowed in a package (only directories, regular files and symlinks)", p, bounded.DescribeMode(m)))
		}
		entries = append(entries, entry{path: p, mode: m})
		return nil
	})
	if err != nil {
		root.Close()
		return nil, nil, err
	}
	slices.SortFunc(entries, func(a, b entry) int { return bytes.Compare([]byte(a.path), []byte(b.path)) })
	return entries, root, nil
}

// checkSymlink refuses absolute symlinks and ones that do not resolve to
// something inside the tree. os.Root resolves the whole chain, ".." included,
// and refuses to leave the tree.
func checkSymlink(root *os.Root, p string) error {
	target, err := root.Readlink(filepath.FromSlash(p))
	if err != nil {
		return fmt.Errorf("read symlink %s: %w", p, err)
	}
	if path.IsAbs(target) || filepath.IsAbs(target) {
		return refused(ErrLinkEscape, fmt.Errorf("symlink %s -> %s: absolute symlinks are not allowed in a package", p, target))
	}
	if _, err := root.Stat(filepath.FromSlash(p)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return refused(ErrLinkEscape, fmt.Errorf("symlink %s -> %s points to nothing inside the package", p, target))
		}
		return refused(ErrLinkEscape, fmt.Errorf("symlink %s -> %s points outside the package: %w", p, target, err))
	}
	return nil
}

func fileSHA256(root *os.Root, p string, cache *hashcache.Cache, abs string) (string, error) {
	f, err := root.Open(filepath.FromSlash(p))
	if err != nil {
		return "", err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return "", err
	} else if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s changed while it was hashed", p)
	}
	name := p
	if cache != nil {
		name = filepath.Join(abs, filepath.FromSlash(p))
	}
	sum, _, err := cache.Sum(f, name)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(sum), nil
}
