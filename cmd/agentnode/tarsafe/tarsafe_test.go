package tarsafe

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The callers' suites (cmd/agentnode/pkginstall archive_test.go, cmd/agentnode/imagebuild
// unpack_test.go) hold the refusals of each configuration; these hold
// what the options change.

type ent struct {
	name string
	typ  byte
	link string
	body string
	mode int64
}

func mkTar(t *testing.T, entries ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode | 0o644, Format: tar.FormatPAX}
		if e.typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func extract(t *testing.T, dst string, opt Options, entries ...ent) error {
	t.Helper()
	return Extract(dst, bytes.NewReader(mkTar(t, entries...)), opt)
}

func wantKind(t *testing.T, err, kind error) {
	t.Helper()
	var te *Error
	if !errors.As(err, &te) || !errors.Is(err, kind) {
		t.Fatalf("err = %v, want an *Error of kind %v", err, kind)
	}
}

func TestOptionsChangeWhatIsAllowed(t *testing.T) {
	dir := func(n string) ent { return ent{name: n, typ: tar.TypeDir} }
	file := func(n string) ent { return ent{name: n, typ: tar.TypeReg, body: "x"} }
	cases := []struct {
		name    string
		entries []ent
		strict  error   // with the zero Options
		loose   Options // allowed with these
	}{
		{"repeated directory", []ent{dir("d/"), dir("d/")}, ErrDuplicate, Options{RepeatDirs: true}},
		{"absolute symlink", []ent{{name: "l", typ: tar.TypeSymlink, link: "/bin/busybox"}}, ErrLinkEscape, Options{AllowAbsoluteSymlinks: true}},
		{"hard link", []ent{file("f"), {name: "h", typ: tar.TypeLink, link: "f"}}, ErrHardLink, Options{AllowHardLinks: true}},
		{"backslash", []ent{file(`a\x2db`)}, ErrUnsafePath, Options{AllowBackslash: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantKind(t, extract(t, t.TempDir(), Options{}, tc.entries...), tc.strict)
			if err := extract(t, t.TempDir(), tc.loose, tc.entries...); err != nil {
				t.Fatalf("with %+v: %v", tc.loose, err)
			}
		})
	}
	wantKind(t, extract(t, t.TempDir(), Options{RefuseWhiteouts: true}, file("a/.wh.b")), ErrUnsafePath)
	if err := extract(t, t.TempDir(), Options{}, file("a/.wh.b")); err != nil {
		t.Fatalf("whiteout name without RefuseWhiteouts: %v", err)
	}
}

// TestSecondStreamCannotReplace: a second stream into the same tree (an
// image's next layer) may repeat a directory but cannot replace a file,
// turn a directory into a file, or write through a symlink of the first.
func TestSecondStreamCannotReplace(t *testing.T) {
	outside := t.TempDir()
	opt := Options{RepeatDirs: true, AllowAbsoluteSymlinks: true}
	dst := t.TempDir()
	if err := extract(t, dst, opt, ent{name: "d/", typ: tar.TypeDir}, ent{name: "d/f", typ: tar.TypeReg, body: "first"},
		ent{name: "l", typ: tar.TypeSymlink, link: outside}); err != nil {
		t.Fatal(err)
	}
	if err := extract(t, dst, opt, ent{name: "d/", typ: tar.TypeDir}); err != nil {
		t.Fatalf("directory again: %v", err)
	}
	wantKind(t, extract(t, dst, opt, ent{name: "d/f", typ: tar.TypeReg, body: "second"}), ErrDuplicate)
	wantKind(t, extract(t, dst, opt, ent{name: "d/f/", typ: tar.TypeDir}), ErrDuplicate)
	wantKind(t, extract(t, dst, opt, ent{name: "l/x", typ: tar.TypeReg, body: "pwned"}), ErrUnsafePath)
	if got, _ := os.ReadFile(filepath.Join(dst, "d", "f")); string(got) != "first" {
		t.Fatalf("d/f = %q", got)
	}
	if left, _ := os.ReadDir(outside); len(left) != 0 {
		t.Fatalf("written outside: %v", left)
	}
}

func TestCapsAndModes(t *testing.T) {
	file := func(n, body string, mode int64) ent { return ent{name: n, typ: tar.TypeReg, body: body, mode: mode} }
	wantKind(t, extract(t, t.TempDir(), Options{MaxEntries: 2}, file("a", "", 0), file("b", "", 0), file("c", "", 0)), ErrTooLarge)
	wantKind(t, extract(t, t.TempDir(), Options{MaxFileBytes: 3}, file("a", "four", 0)), ErrTooLarge)
	wantKind(t, extract(t, t.TempDir(), Options{MaxTotalBytes: 5}, file("a", "abc", 0), file("b", "abc", 0)), ErrTooLarge)
	dst := t.TempDir()
	if err := extract(t, dst, Options{DirPerm: 0o750, FilePerm: 0o640, ExecPerm: 0o750},
		file("sub/plain", "x", 0o666), file("sub/tool", "x", 0o4711)); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{"sub": os.ModeDir | 0o750, "sub/plain": 0o640, "sub/tool": 0o750} {
		if fi, err := os.Lstat(filepath.Join(dst, p)); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v, %v; want %v", p, fi.Mode(), err, want)
		}
	}
}

func TestTrailingData(t *testing.T) {
	data := append(mkTar(t, ent{name: "a", typ: tar.TypeReg, body: "x"}), "hidden"...)
	err := Extract(t.TempDir(), bytes.NewReader(data), Options{RefuseTrailingData: true})
	wantKind(t, err, ErrTrailingData)
	if err := Extract(t.TempDir(), bytes.NewReader(data), Options{}); err != nil {
		t.Fatalf("without RefuseTrailingData: %v", err)
	}
	padded := append(mkTar(t, ent{name: "a", typ: tar.TypeReg, body: "x"}), make([]byte, 4096)...)
	if err := Extract(t.TempDir(), bytes.NewReader(padded), Options{RefuseTrailingData: true}); err != nil {
		t.Fatalf("zero padding: %v", err)
	}
}
