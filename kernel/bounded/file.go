package bounded

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Open opens path with flag (os.O_RDONLY, os.O_RDWR, …) and perm, adding
// O_NOFOLLOW, O_NONBLOCK and O_CLOEXEC, and checks with fstat that it
// opened a regular file. O_NONBLOCK makes the open of a FIFO return at
// once instead of waiting for a writer; it changes nothing for a regular
// file. A symlink (ELOOP from O_NOFOLLOW), FIFO, device, socket or
// directory is an error wrapping ErrNotRegular; a missing file wraps
// fs.ErrNotExist.
func Open(path string, flag int, perm os.FileMode) (*os.File, error) {
	return open(path, flag|syscall.O_NOFOLLOW, perm)
}

// OpenFollow is Open for a path the user named, whose last element may be
// a symlink: the file it leads to must be a regular file.
func OpenFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	return open(path, flag, perm)
}

func open(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK|syscall.O_CLOEXEC, perm)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) && flag&syscall.O_NOFOLLOW != 0 {
			return nil, fmt.Errorf("%s is a symlink: %w", path, ErrNotRegular)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is %s: %w", path, DescribeMode(fi.Mode()), ErrNotRegular)
	}
	return f, nil
}

// DescribeMode names a file type for messages ("a named pipe (FIFO)", "a socket", …).
func DescribeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "not a regular file"
}

// ReadFile reads the regular file at path (Open: no symlink, no FIFO or
// device) if it holds at most max bytes; a larger one is an error wrapping
// ErrTooLarge, refused on its size before anything is read and, should it
// grow meanwhile, after reading max+1 bytes at most.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := Open(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f, path, max)
}

// ReadFileFollow is ReadFile for a path the user named (OpenFollow).
func ReadFileFollow(path string, max int64) ([]byte, error) {
	f, err := OpenFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f, path, max)
}

// ReadAll reads f, an open regular file (Open), if it holds at most max
// bytes, like ReadFile.
func ReadAll(f *os.File, max int64) ([]byte, error) { return read(f, f.Name(), max) }

func read(f *os.File, path string, max int64) ([]byte, error) {
	var size int64
	if fi, err := f.Stat(); err == nil {
		if fi.Size() > max {
			return nil, fmt.Errorf("%s is %d bytes, more than %d: %w", path, fi.Size(), max, ErrTooLarge)
		}
		size = fi.Size()
	}
	// Room for the size fstat reported, so that a file that did not grow
	// is read without reallocating (hashcache files are read before every
	// run); the limit still holds whatever the file does.
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, max+1)); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s is more than %d bytes: %w", path, max, ErrTooLarge)
	}
	return data, nil
}
