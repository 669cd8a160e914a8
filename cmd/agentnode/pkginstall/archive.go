package pkginstall

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentnode/agentnode/cmd/agentnode/tarsafe"
	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/store"
)

// Size caps of a package (specs/store.md, "Limits"). They apply to archives
// and, except MaxArchiveBytes and MaxStreamBytes, to directories too.
const (
	// MaxArchiveBytes caps the archive file itself (compressed).
	MaxArchiveBytes = 64 << 20
	// MaxUnpackedBytes caps the sum of the sizes of a package's regular
	// files, counted as they are written (not as headers claim).
	MaxUnpackedBytes = 64 << 20
	// MaxFileBytes caps one regular file.
	MaxFileBytes = 32 << 20
	// MaxEntries caps the number of entries (files, directories, symlinks;
	// for an archive also the headers agentnode skips).
	MaxEntries = 10_000
	// MaxStreamBytes caps the decompressed tar stream: the file contents
	// plus per-entry headers and padding. It stops gzip bombs whatever the
	// headers say, including zero padding after the end of the archive.
	MaxStreamBytes = MaxUnpackedBytes + MaxEntries*4096
)

// Limits are the caps an install enforces. Installer uses DefaultLimits.
type Limits struct {
	ArchiveBytes  int64
	StreamBytes   int64
	UnpackedBytes int64
	FileBytes     int64
	Entries       int
}

// DefaultLimits are the documented caps.
var DefaultLimits = Limits{
	ArchiveBytes:  MaxArchiveBytes,
	StreamBytes:   MaxStreamBytes,
	UnpackedBytes: MaxUnpackedBytes,
	FileBytes:     MaxFileBytes,
	Entries:       MaxEntries,
}

// Errors of archive installs. An *ArchiveError wraps ErrBadArchive and one
// of the more specific errors below; errors.Is works with both.
var (
	// ErrBadArchive is wrapped by every refusal of an archive's content.
	ErrBadArchive = errors.New("refused archive")
	// ErrUnsafePath: an entry name that is absolute, has a .. element,
	// is empty, uses \ or goes through a symlink of the archive.
	ErrUnsafePath = errors.New("unsafe entry name")
	// ErrLinkEscape: a symlink whose target is absolute or leads out of
	// the package (store.ErrLinkEscape: the same refusal as the content
	// hash's).
	ErrLinkEscape = store.ErrLinkEscape
	// ErrSpecialFile: a device, fifo or other entry that is not a
	// directory, regular file or symlink (store.ErrSpecialFile).
	ErrSpecialFile = store.ErrSpecialFile
	// ErrHardLink: hard links are refused (store the file itself).
	ErrHardLink = errors.New("hard link not allowed")
	// ErrDuplicate: the same name twice.
	ErrDuplicate = errors.New("duplicate entry")
	// ErrTooLarge: a size or count cap (Limits) was exceeded. Also for
	// directories.
	ErrTooLarge = errors.New("package too large")
	// ErrCorrupt: not gzip, not tar, truncated, or a checksum mismatch.
	ErrCorrupt = errors.New("corrupt archive")
	// ErrTrailingData: bytes after the end of the tar archive or of the
	// gzip stream (a second gzip member, or garbage).
	ErrTrailingData = errors.New("trailing data")

	// ErrBadPin: the --sha256 value is not 64 hex digits.
	ErrBadPin = errors.New("invalid sha256 pin")
	// ErrPinMismatch: the archive (or the directory's content hash) does
	// not have the pinned SHA-256. Checked before anything is unpacked.
	ErrPinMismatch = errors.New("sha256 pin mismatch")
)

// ArchiveError is a refused archive. Its text names the archive and, when
// the problem is one entry, the entry:
//
//	archive pkg.tar.gz: entry "../evil": unsafe entry name: has a .. element
type ArchiveError struct {
	Archive string // the archive's path as given
	Entry   string // the entry's name as stored in the archive; "" if none
	Err     error  // wraps one of the specific errors (ErrUnsafePath, …)
}

func (e *ArchiveError) Error() string {
	if e.Entry == "" {
		return fmt.Sprintf("archive %s: %v", e.Archive, e.Err)
	}
	return fmt.Sprintf("archive %s: entry %q: %v", e.Archive, e.Entry, e.Err)
}

// Unwrap returns ErrBadArchive and the specific error.
func (e *ArchiveError) Unwrap() []error { return []error{ErrBadArchive, e.Err} }

// ParsePin parses a --sha256 value: 64 hex digits, optionally prefixed
// "sha256:", any case. It returns the lower-case hex.
func ParsePin(s string) (string, error) {
	h := strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(s, "sha256:"), "SHA256:"))
	if len(h) != 64 {
		return "", fmt.Errorf("%w %q: want 64 hex digits (the output of sha256sum)", ErrBadPin, s)
	}
	if _, err := hex.DecodeString(h); err != nil {
		return "", fmt.Errorf("%w %q: want 64 hex digits (the output of sha256sum)", ErrBadPin, s)
	}
	return h, nil
}

// isGzip reports whether data starts with the gzip magic number.
func isGzip(data []byte) bool {
	return len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b
}

// readArchive reads the whole archive file into memory (it is capped), so
// the bytes that are hashed against a pin are exactly the bytes unpacked:
// the file cannot change in between.
func readArchive(name string, max int64) ([]byte, error) {
	// The user named it: followed if a symlink; a FIFO or device is
	// refused without blocking (bounded.ReadFileFollow).
	data, err := bounded.ReadFileFollow(name, max)
	switch {
	case errors.Is(err, bounded.ErrNotRegular):
		return nil, fmt.Errorf("%w: %s is neither a directory nor a regular file", ErrBadArchive, name)
	case errors.Is(err, bounded.ErrTooLarge):
		return nil, &ArchiveError{Archive: name, Err: fmt.Errorf("%w: the archive is larger than %d bytes", ErrTooLarge, max)}
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// unpackedDir is where an archive is unpacked inside the staging
// directory before its package root is moved to content/.
const unpackedDir = "unpacked"

// unpackPackage unpacks the .tar.gz in data (named archive in errors) into
// staging/unpacked and moves the package root to staging/content: the
// archive's top level if it holds agentnode.yaml, else its only
// directory if that holds it (`tar czf pkg.tgz pkg/`).
func unpackPackage(data []byte, archive, staging string, lim Limits) error {
	dst := filepath.Join(staging, unpackedDir)
	if err := unpack(data, archive, dst, lim); err != nil {
		return err
	}
	content := filepath.Join(staging, store.ContentDir)
	root, err := packageRoot(dst)
	if err != nil {
		return &ArchiveError{Archive: archive, Err: err}
	}
	if err := os.Rename(root, content); err != nil {
		return err
	}
	if root != dst {
		return os.Remove(dst)
	}
	return nil
}

// packageRoot returns dir if it holds agentnode.yaml, else its single
// subdirectory if that does.
func packageRoot(dir string) (string, error) {
	const want = manifest.FileName
	if _, err := os.Lstat(filepath.Join(dir, want)); err == nil {
		return dir, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	if len(ents) == 1 && ents[0].IsDir() {
		sub := filepath.Join(dir, ents[0].Name())
		if _, err := os.Lstat(filepath.Join(sub, want)); err == nil {
			return sub, nil
		}
	}
	return "", fmt.Errorf("no %s at the top of the archive or in its only directory", want)
}

// capReader fails once more than max bytes were read through it.
type capReader struct {
	r    io.Reader
	n    int64
	max  int64
	over error
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n > c.max {
		return 0, c.over
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		return n, c.over
	}
	return n, err
}

// unpack writes the entries of the .tar.gz in data below dst (created,
// must not exist) with cmd/agentnode/tarsafe, every entry checked first; the
// first problem stops it with an *ArchiveError. The caller removes dst on
// error.
func unpack(data []byte, archive, dst string, lim Limits) error {
	bad := func(entry string, kind error, format string, args ...any) error {
		return &ArchiveError{Archive: archive, Entry: entry, Err: fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))}
	}
	if !isGzip(data) {
		return bad("", ErrCorrupt, "not a gzip stream")
	}
	br := bytes.NewReader(data)
	zr, err := gzip.NewReader(br)
	if err != nil {
		return bad("", ErrCorrupt, "gzip: %v", err)
	}
	// One member only: a second one, or anything else after the first, is
	// trailing data (checked below).
	zr.Multistream(false)
	tooBig := &ArchiveError{Archive: archive, Err: fmt.Errorf("%w: decompresses to more than %d bytes", ErrTooLarge, lim.StreamBytes)}
	cr := &capReader{r: zr, max: lim.StreamBytes, over: tooBig}

	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	err = tarsafe.Extract(dst, cr, tarsafe.Options{
		Tree:          "the package",
		MaxEntries:    lim.Entries,
		MaxFileBytes:  lim.FileBytes,
		MaxTotalBytes: lim.UnpackedBytes,
		DirPerm:       0o700,
		FilePerm:      0o600,
		ExecPerm:      0o700,
		Sync:          true,
		// After the end-of-archive blocks only zero padding may follow;
		// reading to the end also makes gzip verify its CRC and length.
		RefuseTrailingData: true,
	})
	var te *tarsafe.Error
	switch {
	case err == nil:
	case errors.Is(err, tooBig):
		return tooBig
	case errors.As(err, &te):
		return &ArchiveError{Archive: archive, Entry: te.Entry, Err: fmt.Errorf("%w: %s", archiveKinds[te.Kind], te.Detail)}
	default:
		return err
	}
	if br.Len() > 0 {
		return bad("", ErrTrailingData, "%d bytes after the gzip stream (a second gzip member or garbage)", br.Len())
	}
	return nil
}

// archiveKinds maps cmd/agentnode/tarsafe's refusals to the installer's errors.
var archiveKinds = map[error]error{
	tarsafe.ErrUnsafePath:   ErrUnsafePath,
	tarsafe.ErrLinkEscape:   ErrLinkEscape,
	tarsafe.ErrSpecialFile:  ErrSpecialFile,
	tarsafe.ErrHardLink:     ErrHardLink,
	tarsafe.ErrDuplicate:    ErrDuplicate,
	tarsafe.ErrTooLarge:     ErrTooLarge,
	tarsafe.ErrCorrupt:      ErrCorrupt,
	tarsafe.ErrTrailingData: ErrTrailingData,
}
