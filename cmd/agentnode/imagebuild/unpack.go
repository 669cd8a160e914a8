package imagebuild

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/agentnode/agentnode/cmd/agentnode/tarsafe"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/sdk/atomicfile"
)

// Extraction limits.
const (
	maxEntries    = 100_000
	maxLayerBytes = 4 << 30
)

// ErrUnsafeLayer is wrapped by extraction errors for a layer entry that is
// refused: an absolute path or "..", a path through a symlink, a symlink or
// hard link pointing outside the rootfs, a device node or other special
// file, a duplicate, or a layer over the limits.
var ErrUnsafeLayer = errors.New("unsafe layer entry")

// unpack extracts the layer tars, in order, into RootfsDir(homeDir, mhex):
// into a staging directory first, made read-only and tree-hashed, then renamed into
// place, and the marker written beside it. An existing rootfs with the same
// tree hash is kept; one that differs is replaced. The caller holds the
// images lock. A later layer may only add entries (and repeat
// directories): a file appearing again, or a whiteout, is refused.
func unpack(homeDir, mhex string, diffIDs []v1.Hash, layers ...io.Reader) error {
	base := image.RootfsBase(homeDir)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return fmt.Errorf("create rootfs directory: %w", err)
	}
	// Staging directories left by an interrupted build (the lock is held).
	if old, err := filepath.Glob(filepath.Join(base, ".staging-*")); err == nil {
		for _, d := range old {
			_ = removeTree(d)
		}
	}
	staging, err := os.MkdirTemp(base, ".staging-"+mhex[:12]+"-")
	if err != nil {
		return fmt.Errorf("create rootfs staging directory: %w", err)
	}
	defer func() { _ = removeTree(staging) }()
	if err := os.Chmod(staging, 0o755); err != nil {
		return fmt.Errorf("rootfs staging directory: %w", err)
	}
	for i, r := range layers {
		if err := extract(staging, r); err != nil {
			return fmt.Errorf("unpack rootfs (layer %d): %w", i+1, err)
		}
	}
	if err := makeReadOnly(staging); err != nil {
		return fmt.Errorf("unpack rootfs: %w", err)
	}
	tree, err := image.TreeHash(staging, nil)
	if err != nil {
		return fmt.Errorf("unpack rootfs: %w", err)
	}
	target := image.RootfsDir(homeDir, mhex)
	current, err := image.TreeHash(target, nil)
	switch {
	case err == nil && current == tree:
		// Already unpacked and intact: keep it (a running sandbox may use it).
	case err != nil && errors.Is(err, fs.ErrNotExist):
		if err := os.Rename(staging, target); err != nil {
			return fmt.Errorf("install rootfs: %w", err)
		}
	default:
		// Modified, or not a plain directory tree: replace it, moving the
		// old one aside first so the rootfs is missing only between two
		// renames.
		aside := staging + ".old"
		if err := os.Rename(target, aside); err != nil {
			return fmt.Errorf("move modified rootfs %s aside: %w", target, err)
		}
		if err := os.Rename(staging, target); err != nil {
			return fmt.Errorf("install rootfs: %w", err)
		}
		if err := removeTree(aside); err != nil {
			return fmt.Errorf("remove modified rootfs: %w", err)
		}
	}
	if err := atomicfile.SyncDir(base); err != nil {
		return fmt.Errorf("install rootfs: %w", err)
	}
	data, err := json.Marshal(image.Marker{Manifest: "sha256:" + mhex, DiffIDs: diffIDs, Tree: tree})
	if err != nil {
		return fmt.Errorf("rootfs marker: %w", err)
	}
	if err := atomicfile.WriteFile(image.MarkerPath(homeDir, mhex), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("rootfs marker: %w", err)
	}
	return nil
}

// extract unpacks the tar stream r into dst with cmd/agentnode/tarsafe (see
// ErrUnsafeLayer): files and directories are created owned by root (when
// running as root) with modes 0644/0755 (0755 for a file with any execute
// bit), symlinks never followed: no path is ever written through a
// symlink. Absolute symlink targets (resolved inside the container) and
// hard links to files extracted before are allowed; whiteouts are refused
// (images have one layer), a directory may repeat.
func extract(dst string, r io.Reader) error {
	err := tarsafe.Extract(dst, r, tarsafe.Options{
		Tree:                  "the rootfs",
		MaxEntries:            maxEntries,
		MaxTotalBytes:         maxLayerBytes,
		DirPerm:               0o755,
		FilePerm:              0o644,
		ExecPerm:              0o755,
		ChownRoot:             true,
		AllowAbsoluteSymlinks: true,
		AllowHardLinks:        true,
		AllowBackslash:        true,
		RepeatDirs:            true,
		RefuseWhiteouts:       true,
	})
	var te *tarsafe.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te) && te.Kind == tarsafe.ErrCorrupt:
		// The layer could not be read or a file not written: not the
		// layer's content refused.
		return fmt.Errorf("unpack layer: %w", err)
	case errors.As(err, &te):
		return fmt.Errorf("%w: %w", ErrUnsafeLayer, err)
	}
	return err
}

// checkSymlink allows an absolute target (resolved inside the container's
// root) and a relative one that stays inside the rootfs.
func checkSymlink(name, target string) error {
	if msg := tarsafe.SymlinkTarget(name, target, true, "the rootfs"); msg != "" {
		return fmt.Errorf("%w: symlink %q -> %q: %s", ErrUnsafeLayer, name, target, msg)
	}
	return nil
}

// makeReadOnly removes every write bit in the tree at dir (directories
// become 0555). Symlinks are left alone: chmod would follow them.
func makeReadOnly(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.Chmod(p, info.Mode().Perm()&^0o222)
	})
}

// removeTree removes a read-only tree: it gives directories back their
// owner write bit first. Symlinks are never followed.
func removeTree(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
