// Package atomicfile is agentnode's one way of writing a file so that a
// reader, or the file after a crash, shows the old content or the new and
// never a mix: a temporary file ".<name>.tmp-*" beside the target, created
// O_EXCL (it never follows or reuses anything at that name) with the
// exact mode asked for (the umask does not apply), written, fsynced,
// renamed over the target (which replaces a symlink there rather than
// following it), and the directory fsynced so the rename is durable. It is
// also the one SyncDir. It is in sdk/ so that the kernel (lockfile, config,
// plugin pins, image layout, rate-limit and hash-cache files, audit) and
// the bundled plugins, which may import only sdk/, share it.
//
// github.com/google/renameio/v2 does the temporary-file-and-rename part
// but does not fit alone: it does not fsync the directory, probes $TMPDIR
// with extra files and a rename unless told the directory, always fsyncs
// (the hash cache deliberately does not), and cannot create a file only if
// it is missing (config setup links the new file into place so it never
// replaces one created meanwhile), so a wrapper would keep all of this
// package's code but the few lines it would replace.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Flag changes how a file is put in place.
type Flag uint8

const (
	// Exclusive links the new file into place instead of renaming it
	// over the target: it fails, with an error wrapping fs.ErrExist, if
	// the target exists, so a file created meanwhile is never replaced.
	Exclusive Flag = 1 << iota
	// NoSync skips the fsyncs of the file and the directory: for caches,
	// whose new content lost in a crash costs only time.
	NoSync
)

// File is a new file being written beside its target. Write to it, then
// Commit; Abort (deferred) removes it unless it was committed.
type File struct {
	*os.File
	path  string
	flags Flag
	done  bool
}

// New creates the temporary file for path with mode perm.
func New(path string, perm fs.FileMode, flags ...Flag) (*File, error) {
	var fl Flag
	for _, f := range flags {
		fl |= f
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	return &File{File: tmp, path: path, flags: fl}, nil
}

// Commit fsyncs and closes the file, puts it in place of its target
// (rename, or link with Exclusive) and fsyncs the directory. After an
// error the target is as it was (unless only the directory fsync failed)
// and the temporary file is gone.
func (f *File) Commit() error {
	if f.done {
		return errors.New("atomicfile: Commit after Commit or Abort")
	}
	defer f.Abort()
	sync := f.flags&NoSync == 0
	if sync {
		if err := f.File.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", f.path, err)
		}
	}
	if err := f.File.Close(); err != nil {
		return err
	}
	if f.flags&Exclusive != 0 {
		if err := os.Link(f.Name(), f.path); err != nil {
			return err
		}
	} else if err := os.Rename(f.Name(), f.path); err != nil {
		return err
	}
	f.done = true
	if f.flags&Exclusive != 0 {
		_ = os.Remove(f.Name())
	}
	if sync {
		return SyncDir(filepath.Dir(f.path))
	}
	return nil
}

// Abort closes and removes the temporary file unless it was committed.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.File.Close()
	os.Remove(f.Name())
}

// WriteFile puts a file holding data with mode perm at path (see the
// package comment and the flags).
func WriteFile(path string, data []byte, perm fs.FileMode, flags ...Flag) error {
	f, err := New(path, perm, flags...)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Commit()
}

// SyncDir makes the entries of dir (files created, renamed or removed in
// it) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
