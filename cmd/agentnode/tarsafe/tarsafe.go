// Package tarsafe is agentnode's one extractor of untrusted tar streams:
// package archives (cmd/agentnode/pkginstall) and sandbox image layers
// (cmd/agentnode/imagebuild) are both unpacked by Extract. It sits with
// those front ends, outside the kernel, because only installing and
// building unpack archives: a run only verifies trees already unpacked
// (kernel/treehash). Every write goes through an os.Root opened
// on the destination, and every entry is checked before anything is
// created for it, so a missed check still cannot write outside the tree:
//
//   - names: empty, absolute, with a ".." element, with a NUL byte, or
//     (unless Options.AllowBackslash) with a backslash;
//   - an entry below a symlink or a file (nothing is ever created through a
//     symlink, even one pointing inside; missing parents are made as real
//     directories);
//   - symlinks with an empty target, a relative target that climbs out of
//     the tree, or (unless Options.AllowAbsoluteSymlinks) an absolute one;
//   - hard links (unless Options.AllowHardLinks, and then only to a local
//     regular file extracted before);
//   - devices, fifos and every type other than directory, regular file,
//     symlink and hard link (pax global headers are skipped);
//   - a name twice (a directory may repeat with Options.RepeatDirs);
//   - whiteouts (".wh.*", with Options.RefuseWhiteouts);
//   - more entries, bytes in one file or bytes in all than the caps;
//   - with Options.RefuseTrailingData, anything but zeros after the tar
//     archive's end.
//
// Owners, times and most mode bits are not restored: directories get
// Options.DirPerm, files Options.FilePerm or, with any execute bit in the
// header, Options.ExecPerm. A refusal is an *Error whose Kind is one of
// the sentinels below; callers map them to their own error kinds.
package tarsafe

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentnode/agentnode/kernel/bounded"
)

// The kinds of refusal (Error.Kind).
var (
	// ErrUnsafePath: an entry name that is empty, absolute, has a ..
	// element, contains NUL or \, goes through a symlink or a file, a
	// root entry that is not a directory, a whiteout, or a destination
	// path os.Root refuses.
	ErrUnsafePath = errors.New("unsafe entry name")
	// ErrLinkEscape: a symlink whose target is empty, absolute (when not
	// allowed) or leads out of the tree; a hard link to something that is
	// not a regular file of the tree.
	ErrLinkEscape = errors.New("link leads out of the tree")
	// ErrSpecialFile: a device, fifo or other entry type.
	ErrSpecialFile = errors.New("entry type not allowed")
	// ErrHardLink: a hard link, when they are not allowed.
	ErrHardLink = errors.New("hard link not allowed")
	// ErrDuplicate: the same name twice.
	ErrDuplicate = errors.New("duplicate entry")
	// ErrTooLarge: a cap of Options was exceeded.
	ErrTooLarge = errors.New("too large")
	// ErrCorrupt: the stream could not be read (not tar, truncated, or
	// the reader's own error, which Error wraps), or a regular file could
	// not be written (Error wraps the cause).
	ErrCorrupt = errors.New("corrupt archive")
	// ErrTrailingData: non-zero bytes after the tar archive's end.
	ErrTrailingData = errors.New("trailing data")
)

// Error is a refused entry or stream.
type Error struct {
	Entry  string // the entry's name as stored in the archive; "" if none
	Kind   error  // one of the sentinels above
	Detail string // what is wrong, without the entry's name
	Err    error  // the underlying error (a read error, os.Root's refusal), or nil
}

func (e *Error) Error() string {
	s := e.Kind.Error() + ": " + e.Detail
	if e.Entry != "" {
		s = fmt.Sprintf("entry %q: %s", e.Entry, s)
	}
	return s
}

// Unwrap returns Kind and, when there is one, Err.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// Options are what callers differ in. The zero value is the strictest:
// no caps, though; set them.
type Options struct {
	// Tree names the tree in messages ("the package", "the rootfs").
	Tree string
	// MaxEntries caps the headers read (skipped ones included); 0: no cap.
	MaxEntries int
	// MaxFileBytes caps one regular file; 0: no cap.
	MaxFileBytes int64
	// MaxTotalBytes caps the sum of the regular files' sizes, counted
	// on the headers and as written; 0: no cap.
	MaxTotalBytes int64
	// DirPerm, FilePerm and ExecPerm are the modes created (0 means 0700,
	// 0600, 0700). ExecPerm is for a file with any execute bit.
	DirPerm, FilePerm, ExecPerm fs.FileMode
	// ChownRoot makes everything created owned by 0:0 when running as
	// root.
	ChownRoot bool
	// Sync fsyncs every file written.
	Sync bool
	// AllowAbsoluteSymlinks allows absolute symlink targets (an image's
	// /bin/sh -> /bin/busybox is resolved inside the container; symlinks
	// are never followed here).
	AllowAbsoluteSymlinks bool
	// AllowHardLinks allows hard links to a local regular file extracted
	// before.
	AllowHardLinks bool
	// AllowBackslash allows \ in names (image layers may hold systemd's
	// escaped unit names); package archives use / only.
	AllowBackslash bool
	// RepeatDirs lets a directory appear again, in this stream or one
	// extracted before into the same destination.
	RepeatDirs bool
	// RefuseWhiteouts refuses ".wh.*" names (layer deletions).
	RefuseWhiteouts bool
	// RefuseTrailingData reads r to its end after the tar archive and
	// refuses any non-zero byte (and lets a compressing reader verify its
	// checksum).
	RefuseTrailingData bool
}

func (o *Options) tree() string {
	if o.Tree == "" {
		return "the tree"
	}
	return o.Tree
}

// Extract unpacks the tar stream r into the existing directory dst. The
// first problem stops it; what was created so far stays (the caller
// removes dst). Several streams may be extracted into the same dst in
// turn (image layers): a name already there is a duplicate unless it is a
// directory and Options.RepeatDirs is set.
func Extract(dst string, r io.Reader, opt Options) error {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	x := &extractor{
		opt:      opt,
		root:     root,
		seen:     map[string]bool{},
		realDirs: map[string]bool{},
		asRoot:   opt.ChownRoot && os.Geteuid() == 0,
	}
	if x.opt.DirPerm == 0 {
		x.opt.DirPerm = 0o700
	}
	if x.opt.FilePerm == 0 {
		x.opt.FilePerm = 0o600
	}
	if x.opt.ExecPerm == 0 {
		x.opt.ExecPerm = 0o700
	}
	tr := tar.NewReader(r)
	for entries := 1; ; entries++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &Error{Kind: ErrCorrupt, Detail: "tar: " + err.Error(), Err: err}
		}
		if opt.MaxEntries > 0 && entries > opt.MaxEntries {
			return x.refuse(hdr, ErrTooLarge, "more than %d entries", opt.MaxEntries)
		}
		if err := x.entry(hdr, tr); err != nil {
			return err
		}
	}
	if opt.RefuseTrailingData {
		if err := drainZeros(r); err != nil {
			if errors.Is(err, ErrTrailingData) {
				return &Error{Kind: ErrTrailingData, Detail: "data after the end of the tar archive"}
			}
			return &Error{Kind: ErrCorrupt, Detail: "after the tar archive: " + err.Error(), Err: err}
		}
	}
	return nil
}

type extractor struct {
	opt    Options
	root   *os.Root
	asRoot bool
	total  int64
	// seen holds the cleaned names of this stream's entries.
	seen map[string]bool
	// realDirs holds directories known to be real (created or checked).
	realDirs map[string]bool
}

func (x *extractor) refuse(hdr *tar.Header, kind error, format string, args ...any) error {
	return &Error{Entry: hdr.Name, Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// fail is a refusal caused by err from the destination (os.Root refuses a
// path out of dst with an error, too).
func (x *extractor) fail(hdr *tar.Header, kind error, what string, err error) error {
	return &Error{Entry: hdr.Name, Kind: kind, Detail: what + ": " + err.Error(), Err: err}
}

func (x *extractor) entry(hdr *tar.Header, tr *tar.Reader) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil // pax global metadata, nothing to create
	}
	rel, msg := EntryPath(hdr.Name, x.opt.AllowBackslash, x.opt.tree())
	if msg != "" {
		return x.refuse(hdr, ErrUnsafePath, "%s", msg)
	}
	if rel == "." {
		if hdr.Typeflag != tar.TypeDir {
			return x.refuse(hdr, ErrUnsafePath, "the archive's top level must be a directory")
		}
		return nil
	}
	if x.opt.RefuseWhiteouts && strings.HasPrefix(path.Base(rel), ".wh.") {
		return x.refuse(hdr, ErrUnsafePath, "a whiteout (a deletion of an earlier layer's file) is not allowed")
	}
	if x.seen[rel] && !(x.opt.RepeatDirs && hdr.Typeflag == tar.TypeDir && x.realDirs[rel]) {
		return x.refuse(hdr, ErrDuplicate, "%s appears twice in the archive", rel)
	}
	x.seen[rel] = true
	switch hdr.Typeflag {
	case tar.TypeDir:
		return x.dir(hdr, rel)
	case tar.TypeReg:
		return x.file(hdr, rel, tr)
	case tar.TypeSymlink:
		if msg := SymlinkTarget(rel, hdr.Linkname, x.opt.AllowAbsoluteSymlinks, x.opt.tree()); msg != "" {
			return x.refuse(hdr, ErrLinkEscape, "-> %q: %s", hdr.Linkname, msg)
		}
		if err := x.parents(hdr, rel, true); err != nil {
			return err
		}
		name := filepath.FromSlash(rel)
		if err := x.root.Symlink(hdr.Linkname, name); err != nil {
			return x.exists(hdr, rel, "create symlink", err)
		}
		return x.chown(hdr, name)
	case tar.TypeLink:
		if !x.opt.AllowHardLinks {
			return x.refuse(hdr, ErrHardLink, "hard link to %q; store the file itself", hdr.Linkname)
		}
		return x.hardLink(hdr, rel)
	case tar.TypeChar, tar.TypeBlock:
		return x.refuse(hdr, ErrSpecialFile, "a device file is not allowed in %s", x.opt.tree())
	case tar.TypeFifo:
		return x.refuse(hdr, ErrSpecialFile, "a named pipe is not allowed in %s", x.opt.tree())
	}
	return x.refuse(hdr, ErrSpecialFile, "tar entry type %s is not allowed (only directories, regular files and symlinks)",
		TypeName(hdr.Typeflag))
}

// exists turns a create error into a duplicate (the name is there from an
// earlier stream) or a refusal of the path.
func (x *extractor) exists(hdr *tar.Header, rel, what string, err error) error {
	if errors.Is(err, fs.ErrExist) {
		return x.refuse(hdr, ErrDuplicate, "%s appears twice in the archive", rel)
	}
	return x.fail(hdr, ErrUnsafePath, what, err)
}

func (x *extractor) chown(hdr *tar.Header, name string) error {
	if !x.asRoot {
		return nil
	}
	if err := x.root.Lchown(name, 0, 0); err != nil {
		return x.fail(hdr, ErrUnsafePath, "chown", err)
	}
	return nil
}

// mkdir creates the directory rel, or checks that what is there is a real
// directory.
func (x *extractor) mkdir(hdr *tar.Header, rel string, repeat bool) error {
	name := filepath.FromSlash(rel)
	err := x.root.Mkdir(name, x.opt.DirPerm)
	if errors.Is(err, fs.ErrExist) {
		fi, lerr := x.root.Lstat(name)
		switch {
		case lerr != nil:
			return x.fail(hdr, ErrUnsafePath, "create directory", lerr)
		case !fi.IsDir():
			return x.refuse(hdr, ErrDuplicate, "%s is a directory and %s", rel, describe(fi.Mode()))
		case !repeat:
			return x.refuse(hdr, ErrDuplicate, "%s appears twice in the archive", rel)
		}
		x.realDirs[rel] = true
		return nil
	}
	if err != nil {
		return x.fail(hdr, ErrUnsafePath, "create directory", err)
	}
	// Mkdir's mode is masked by the umask; the tree's is not.
	if err := x.root.Chmod(name, x.opt.DirPerm); err != nil {
		return x.fail(hdr, ErrUnsafePath, "create directory", err)
	}
	if err := x.chown(hdr, name); err != nil {
		return err
	}
	x.realDirs[rel] = true
	return nil
}

func (x *extractor) dir(hdr *tar.Header, rel string) error {
	if err := x.parents(hdr, rel, true); err != nil {
		return err
	}
	if x.realDirs[rel] {
		// Made as a parent of an earlier entry, or listed again.
		return nil
	}
	return x.mkdir(hdr, rel, x.opt.RepeatDirs)
}

// parents checks that every parent of rel is a real directory, not a
// symlink or a file; with create, missing ones are made.
func (x *extractor) parents(hdr *tar.Header, rel string, create bool) error {
	var missing []string
	for p := path.Dir(rel); p != "." && !x.realDirs[p]; p = path.Dir(p) {
		missing = append(missing, p)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		p := missing[i]
		fi, err := x.root.Lstat(filepath.FromSlash(p))
		switch {
		case err == nil && fi.IsDir():
			x.realDirs[p] = true
		case err == nil && fi.Mode()&fs.ModeSymlink != 0:
			return x.refuse(hdr, ErrUnsafePath, "goes through the symlink %s of the archive", p)
		case err == nil:
			return x.refuse(hdr, ErrUnsafePath, "goes through %s, %s", p, describe(fi.Mode()))
		case errors.Is(err, fs.ErrNotExist) && create:
			if err := x.mkdir(hdr, p, true); err != nil {
				return err
			}
		default:
			return x.fail(hdr, ErrUnsafePath, "parent "+p, err)
		}
	}
	return nil
}

func (x *extractor) file(hdr *tar.Header, rel string, tr io.Reader) error {
	max := x.opt.MaxFileBytes
	if max > 0 && hdr.Size > max {
		return x.refuse(hdr, ErrTooLarge, "%d bytes; a file may have at most %d", hdr.Size, max)
	}
	if hdr.Size < 0 || x.opt.MaxTotalBytes > 0 && x.total+hdr.Size > x.opt.MaxTotalBytes {
		return x.refuse(hdr, ErrTooLarge, "the files of %s exceed %d bytes in all", x.opt.tree(), x.opt.MaxTotalBytes)
	}
	if err := x.parents(hdr, rel, true); err != nil {
		return err
	}
	name := filepath.FromSlash(rel)
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return x.refuse(hdr, ErrDuplicate, "%s appears twice in the archive", rel)
	}
	if err != nil {
		return x.fail(hdr, ErrCorrupt, "write", err)
	}
	defer f.Close()
	// What the tar reader yields is counted, not what the header said
	// (a sparse file expands).
	limit := hdr.Size
	if max > 0 {
		limit = max
	}
	src := &errReader{r: io.LimitReader(tr, limit+1)}
	n, err := io.Copy(f, src)
	x.total += n
	switch {
	case src.err != nil:
		return &Error{Entry: hdr.Name, Kind: ErrCorrupt, Detail: "truncated or damaged: " + src.err.Error(), Err: src.err}
	case err != nil:
		return x.fail(hdr, ErrCorrupt, "write", err)
	case max > 0 && n > max:
		return x.refuse(hdr, ErrTooLarge, "more than %d bytes", max)
	case x.opt.MaxTotalBytes > 0 && x.total > x.opt.MaxTotalBytes:
		return x.refuse(hdr, ErrTooLarge, "the files of %s exceed %d bytes in all", x.opt.tree(), x.opt.MaxTotalBytes)
	}
	// Only an execute bit is kept: setuid, setgid, sticky and the other
	// permission bits are dropped.
	perm := x.opt.FilePerm
	if hdr.Mode&0o111 != 0 {
		perm = x.opt.ExecPerm
	}
	if err := f.Chmod(perm); err != nil {
		return x.fail(hdr, ErrCorrupt, "write", err)
	}
	if x.asRoot {
		if err := f.Chown(0, 0); err != nil {
			return x.fail(hdr, ErrCorrupt, "write", err)
		}
	}
	if x.opt.Sync {
		if err := f.Sync(); err != nil {
			return x.fail(hdr, ErrCorrupt, "write", err)
		}
	}
	if err := f.Close(); err != nil {
		return x.fail(hdr, ErrCorrupt, "write", err)
	}
	return nil
}

func (x *extractor) hardLink(hdr *tar.Header, rel string) error {
	target, msg := EntryPath(hdr.Linkname, x.opt.AllowBackslash, x.opt.tree())
	if msg != "" || target == "." {
		return x.refuse(hdr, ErrLinkEscape, "hard link to %q points outside %s", hdr.Linkname, x.opt.tree())
	}
	if err := x.parents(hdr, target, false); err != nil {
		return err
	}
	fi, err := x.root.Lstat(filepath.FromSlash(target))
	if err != nil || !fi.Mode().IsRegular() {
		return x.refuse(hdr, ErrLinkEscape, "hard link to %q: the target is not a file extracted before it", hdr.Linkname)
	}
	if err := x.parents(hdr, rel, true); err != nil {
		return err
	}
	if err := x.root.Link(filepath.FromSlash(target), filepath.FromSlash(rel)); err != nil {
		return x.exists(hdr, rel, "create hard link", err)
	}
	return nil
}

// errReader records the error of the reader it wraps, so a read failure
// (a damaged stream) is told apart from a write failure.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

// drainZeros reads r to its end; any non-zero byte is ErrTrailingData.
func drainZeros(r io.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		for _, b := range buf[:n] {
			if b != 0 {
				return ErrTrailingData
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// EntryPath checks a tar entry name and returns it cleaned and relative
// ("." for the top level), or a message saying what is wrong with it.
// tree names the tree in the message.
func EntryPath(name string, allowBackslash bool, tree string) (string, string) {
	switch {
	case name == "":
		return "", "empty name"
	case strings.ContainsRune(name, 0):
		return "", "name contains a NUL byte"
	case !allowBackslash && strings.Contains(name, `\`):
		return "", `name contains \; archives use / as the separator`
	case strings.HasPrefix(name, "/"):
		return "", "absolute name"
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return "", "name has a .. element"
		}
	}
	rel := path.Clean(name)
	if rel != "." && !filepath.IsLocal(filepath.FromSlash(rel)) {
		return "", "name leads out of " + tree
	}
	return rel, ""
}

// SymlinkTarget checks the target of the symlink at rel: not empty, no
// NUL, absolute only with allowAbs, and a relative one lexically inside
// the tree. It returns "" or what is wrong. tree names the tree in the
// message.
func SymlinkTarget(rel, target string, allowAbs bool, tree string) string {
	switch {
	case target == "":
		return "empty target"
	case strings.ContainsRune(target, 0):
		return "target contains a NUL byte"
	case strings.HasPrefix(target, "/"), filepath.IsAbs(target):
		if allowAbs {
			return ""
		}
		return "absolute target"
	}
	resolved := path.Join(path.Dir(rel), target)
	if resolved != "." && !filepath.IsLocal(filepath.FromSlash(resolved)) {
		return "target leads out of " + tree
	}
	return ""
}

// TypeName names a tar entry type in messages.
func TypeName(t byte) string {
	switch t {
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "fifo"
	}
	return strconv.Quote(string(t))
}

func describe(m fs.FileMode) string {
	if m.IsRegular() {
		return "a regular file"
	}
	return bounded.DescribeMode(m)
}
