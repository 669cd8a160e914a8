package audit

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/sdk/atomicfile"
)

// File names inside the audit directory.
const (
	FileName = "audit.jsonl" // the active file; rotated ones are audit.jsonl.1 (newest) ... .N
	LockName = "audit.lock"  // flock'ed by every writer (exclusive) and reader (shared)
)

// LogFile is one file of the log.
type LogFile struct {
	Name string // base name
	N    int    // 0 for the active file, N for audit.jsonl.N
}

// ListFiles returns the log's files oldest first: audit.jsonl.N (highest N)
// ... audit.jsonl.1, audit.jsonl. A missing directory is no files.
func ListFiles(dir string) ([]LogFile, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var files []LogFile
	for _, e := range ents {
		name := e.Name()
		if name == FileName {
			files = append(files, LogFile{Name: name})
			continue
		}
		num, ok := strings.CutPrefix(name, FileName+".")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 1 || strconv.Itoa(n) != num {
			continue
		}
		files = append(files, LogFile{Name: name, N: n})
	}
	sort.Slice(files, func(i, j int) bool {
		a, b := files[i].N, files[j].N
		if a == 0 || b == 0 {
			return b == 0 && a != 0
		}
		return a > b
	})
	return files, nil
}

func rotatedName(n int) string { return FileName + "." + strconv.Itoa(n) }

// LastLines returns up to n complete lines (without their newlines) from the
// end of the first size bytes of f, oldest first, and the bytes after the
// last newline (a torn line, normally empty). n <= 0 means every line.
func LastLines(f *os.File, size int64, n int) (lines [][]byte, torn []byte, err error) {
	want := int64(8 << 10)
	if n <= 0 {
		want = size
	}
	for {
		start := max(size-want, 0)
		buf := make([]byte, size-start)
		if _, err := f.ReadAt(buf, start); err != nil {
			return nil, nil, err
		}
		nl := bytes.LastIndexByte(buf, '\n')
		if nl >= 0 || start == 0 {
			torn = buf[nl+1:]
			body := buf[:nl+1]
			if start > 0 {
				// The piece before the first newline may be the end of a
				// longer line: drop it.
				body = body[bytes.IndexByte(body, '\n')+1:]
			}
			lines = splitLines(body)
			if start == 0 || (n > 0 && len(lines) >= n) {
				if n > 0 && len(lines) > n {
					lines = lines[len(lines)-n:]
				}
				return lines, torn, nil
			}
		}
		want *= 4
	}
}

// splitLines splits newline-terminated data into lines without newlines.
func splitLines(data []byte) [][]byte {
	var lines [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, data[:i])
		data = data[i+1:]
	}
	return lines
}

// lockFile flocks f (unix.LOCK_EX or unix.LOCK_SH), retrying on EINTR.
func lockFile(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

func unlockFile(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_UN) }

// syncDir makes directory entries (created, renamed files) durable: sdk/atomicfile's.
var syncDir = atomicfile.SyncDir

// ReadLock opens and share-locks the lock file for a consistent read of the
// log (no append or rotation in between). Without a lock file (no writer
// ever ran, or a read-only copy of the log) it returns nil and no error.
func ReadLock(dir string) (*os.File, error) {
	f, err := bounded.Open(filepath.Join(dir, LockName), os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	if err := lockFile(f, unix.LOCK_SH); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// ReadUnlock releases ReadLock's lock (nil: none was taken).
func ReadUnlock(f *os.File) {
	if f != nil {
		_ = unlockFile(f)
		_ = f.Close()
	}
}
