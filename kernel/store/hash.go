package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/hashcache"
	"github.com/agentnode/agentnode/kernel/treehash"
)

// ContentHash returns "sha256:<hex>", the content hash of the tree at dir
// as defined in specs/store.md (kernel/treehash's Content format): SHA-256
// over a header and one record per entry in byte order of the relative
// path, each record kind NUL path NUL value NUL, where kind is d
// (directory, empty value), f (regular file, value "x" or "-" for the
// executable bit followed by the hex SHA-256 of the content) or l
// (symlink, value the link target). Ownership, times and other permission
// bits are not hashed. Special files, absolute symlinks and symlinks that
// resolve outside the tree (or nowhere) are errors.
func ContentHash(dir string) (string, error) { return contentHash(dir, nil, "") }

// contentHash is ContentHash taking the digests of files that provably did
// not change since they were last hashed from cache (kernel/hashcache),
// when cache is not nil. The tree itself (names, kinds, modes, symlink
// targets) is read every time. A non-empty skip is a top-level name left
// out with everything below it (the installed dependencies, hashed apart).
func contentHash(dir string, cache *hashcache.Cache, skip string) (string, error) {
	opt := treehash.Options{Check: checkEntry, Cache: cache}
	if skip != "" {
		opt.Skip = func(p string, _ fs.FileInfo) bool { return p == skip }
	}
	return treehash.Hash(dir, treehash.Content, opt)
}

// checkEntry allows only directories, regular files and relative symlinks
// that resolve inside the tree.
func checkEntry(root *os.Root, p string, info fs.FileInfo) error {
	m := info.Mode()
	switch {
	case m.IsDir(), m.IsRegular():
		return nil
	case m&fs.ModeSymlink != 0:
		return checkSymlink(root, p)
	}
	return refused(ErrSpecialFile, fmt.Errorf("%s: %s is not allowed in a package (only directories, regular files and symlinks)", p, bounded.DescribeMode(m)))
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
