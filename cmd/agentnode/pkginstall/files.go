package pkginstall

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/store"
)

// copyTree copies the tree at src to dst (which must not exist) without
// following symlinks: directories, regular files (content and executable
// bit) and symlinks (their target text). Anything else is an error, and so
// is a tree over the entry, file or total size caps of lim (ErrTooLarge).
func copyTree(src, dst string, lim Limits) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", src)
	}
	var (
		entries int
		total   int64
	)
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel != "." {
			entries++
			if entries > lim.Entries {
				return fmt.Errorf("%w: more than %d entries", ErrTooLarge, lim.Entries)
			}
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		m := info.Mode()
		switch {
		case m.IsDir():
			return os.Mkdir(target, 0o700)
		case m.IsRegular():
			if info.Size() > lim.FileBytes {
				return fmt.Errorf("%w: %s has %d bytes; a file may have at most %d", ErrTooLarge, filepath.ToSlash(rel), info.Size(), lim.FileBytes)
			}
			n, err := copyFile(p, target, m, lim.FileBytes)
			total += n
			if err != nil {
				return err
			}
			if total > lim.UnpackedBytes {
				return fmt.Errorf("%w: the package's files exceed %d bytes in all", ErrTooLarge, lim.UnpackedBytes)
			}
			return nil
		case m&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		}
		return store.Refused(ErrSpecialFile, fmt.Errorf("%s: %s is not allowed in a package (only directories, regular files and symlinks)",
			filepath.ToSlash(rel), bounded.DescribeMode(m)))
	})
}

// copyFile copies src to dst (created), at most max bytes (more is
// ErrTooLarge, the file may have grown), and returns the bytes copied.
func copyFile(src, dst string, m fs.FileMode, max int64) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil {
		return 0, err
	} else if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s changed while it was copied", src)
	}
	perm := fs.FileMode(0o600)
	if m.Perm()&0o111 != 0 {
		perm = 0o700
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, io.LimitReader(in, max+1))
	if err == nil && n > max {
		err = fmt.Errorf("%w: %s has more than %d bytes", ErrTooLarge, src, max)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// makeReadOnly sets files to 0444, or 0555 if any executable bit is set,
// and directories to 0555. Symlinks are left alone (chmod would follow
// them).
func makeReadOnly(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			return nil
		case d.IsDir():
			dirs = append(dirs, p)
			return nil
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			mode := fs.FileMode(0o444)
			if info.Mode().Perm()&0o111 != 0 {
				mode = 0o555
			}
			return os.Chmod(p, mode)
		}
		return store.Refused(ErrSpecialFile, fmt.Errorf("%s: %s is not allowed in a package", p, bounded.DescribeMode(d.Type())))
	})
	if err != nil {
		return err
	}
	// Deepest first, so no directory is read-only while its children change.
	for _, d := range slices.Backward(dirs) {
		if err := os.Chmod(d, 0o555); err != nil {
			return err
		}
	}
	return nil
}

// removeTree removes p and everything below it, first making its
// directories writable again. A missing p is not an error.
func removeTree(p string) error {
	if _, err := os.Lstat(p); err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}
