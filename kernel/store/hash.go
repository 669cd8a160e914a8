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

// Refusals of a package's content, by ContentHash and Verify as by an
// install (cmd/agentnode/pkginstall wraps the same errors for an archive's
// entries).
var (
	// ErrLinkEscape: a symlink whose target is absolute or leads out of
	// the package.
	ErrLinkEscape = errors.New("symlink leads out of the package")
	// ErrSpecialFile: a device, fifo or other entry that is not a
	// directory, regular file or symlink.
	ErrSpecialFile = errors.New("entry type not allowed")
)

// contentError is a package's content refused for one of the reasons an
// archive entry is (ErrLinkEscape, ErrSpecialFile), so that both are told
// apart from failures of the machine the same way. Its text is err's.
type contentError struct {
	kind, err error
}

func (e *contentError) Error() string   { return e.err.Error() }
func (e *contentError) Unwrap() []error { return []error{e.kind, e.err} }

// Refused marks err as a refusal of the package's content of kind
// (ErrLinkEscape or ErrSpecialFile): errors.Is finds both.
func Refused(kind, err error) error { return &contentError{kind: kind, err: err} }

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

// ContentHashExcept is ContentHash with the top-level name skip (and
// everything below it) left out: the artifact hash of a package whose
// installed dependencies (DepsDir) are hashed apart.
func ContentHashExcept(dir, skip string) (string, error) { return contentHash(dir, nil, skip) }

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
	return Refused(ErrSpecialFile, fmt.Errorf("%s: %s is not allowed in a package (only directories, regular files and symlinks)", p, bounded.DescribeMode(m)))
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
		return Refused(ErrLinkEscape, fmt.Errorf("symlink %s -> %s: absolute symlinks are not allowed in a package", p, target))
	}
	if _, err := root.Stat(filepath.FromSlash(p)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Refused(ErrLinkEscape, fmt.Errorf("symlink %s -> %s points to nothing inside the package", p, target))
		}
		return Refused(ErrLinkEscape, fmt.Errorf("symlink %s -> %s points outside the package: %w", p, target, err))
	}
	return nil
}
