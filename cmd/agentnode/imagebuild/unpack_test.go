package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/image"
)

// ent is one hand-made tar entry.
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
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: mode, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if e.typ == tar.TypeChar || e.typ == tar.TypeBlock {
			hdr.Devmajor, hdr.Devminor = 1, 3
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExtractRefusesUnsafeEntries(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("host file"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := func(n string) ent { return ent{name: n, typ: tar.TypeDir, mode: 0o755} }
	file := func(n string) ent { return ent{name: n, typ: tar.TypeReg, body: "pwned"} }
	cases := map[string][]ent{
		"dot-dot":                 {file("../x")},
		"dot-dot inside":          {dir("a/"), file("a/../../x")},
		"dot-dot at the end":      {dir("a/"), file("a/..")},
		"absolute path":           {file(filepath.Join(outside, "abs"))},
		"absolute root":           {file("/x")},
		"char device":             {dir("dev/"), {name: "dev/null", typ: tar.TypeChar}},
		"block device":            {{name: "sda", typ: tar.TypeBlock}},
		"fifo":                    {{name: "fifo", typ: tar.TypeFifo}},
		"hardlink dot-dot":        {{name: "h", typ: tar.TypeLink, link: "../victim"}},
		"hardlink absolute":       {{name: "h", typ: tar.TypeLink, link: victim}},
		"hardlink to missing":     {{name: "h", typ: tar.TypeLink, link: "nothing"}},
		"hardlink to dir":         {dir("d/"), {name: "h", typ: tar.TypeLink, link: "d"}},
		"hardlink via symlink":    {{name: "l", typ: tar.TypeSymlink, link: outside}, {name: "h", typ: tar.TypeLink, link: "l/victim"}},
		"symlink escapes":         {{name: "l", typ: tar.TypeSymlink, link: "../victim"}},
		"symlink escapes deep":    {dir("a/"), {name: "a/l", typ: tar.TypeSymlink, link: "../../x"}},
		"write through symlink":   {{name: "l", typ: tar.TypeSymlink, link: outside}, file("l/victim")},
		"mkdir through symlink":   {{name: "l", typ: tar.TypeSymlink, link: outside}, dir("l/sub/")},
		"parent through symlink":  {{name: "l", typ: tar.TypeSymlink, link: outside}, file("l/new/file")},
		"overwrite symlink":       {{name: "l", typ: tar.TypeSymlink, link: victim}, file("l")},
		"duplicate file":          {file("f"), file("f")},
		"file then dir":           {file("f"), dir("f/")},
		"whiteout":                {file(".wh.x")},
		"empty symlink target":    {{name: "l", typ: tar.TypeSymlink, link: ""}},
		"root is a file":          {file(".")},
		"unknown type":            {{name: "c", typ: tar.TypeCont}},
		"symlink then file under": {{name: "bin", typ: tar.TypeSymlink, link: "/"}, file("bin/x")},
	}
	for name, entries := range cases {
		t.Run(name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "root")
			if err := os.Mkdir(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			err := extract(dst, bytes.NewReader(mkTar(t, entries...)))
			if !errors.Is(err, ErrUnsafeLayer) {
				t.Fatalf("extract = %v, want ErrUnsafeLayer", err)
			}
			if data, err := os.ReadFile(victim); err != nil || string(data) != "host file" {
				t.Fatalf("host file changed: %q, %v", data, err)
			}
			left, _ := os.ReadDir(outside)
			if len(left) != 1 {
				t.Fatalf("extract created files outside the root: %v", left)
			}
		})
	}
}

func TestExtractAllowsSafeEntries(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	layer := mkTar(t,
		ent{name: "./", typ: tar.TypeDir},
		ent{name: "./bin/", typ: tar.TypeDir, mode: 0o700},
		ent{name: "./bin/busybox", typ: tar.TypeReg, body: "#!", mode: 0o4711},
		ent{name: "bin/sh", typ: tar.TypeSymlink, link: "busybox"},
		ent{name: "usr/bin/env", typ: tar.TypeSymlink, link: "/bin/busybox"}, // parents made
		ent{name: "etc/passwd", typ: tar.TypeSymlink, link: "/etc/shadow"},   // absolute: inside the container
		ent{name: "a/b/up", typ: tar.TypeSymlink, link: "../../bin"},
		ent{name: "bin/", typ: tar.TypeDir}, // listed twice
		ent{name: "bin/hard", typ: tar.TypeLink, link: "bin/busybox"},
		ent{name: "data", typ: tar.TypeReg, body: "x", mode: 0o666},
	)
	if err := extract(dst, bytes.NewReader(layer)); err != nil {
		t.Fatalf("extract: %v", err)
	}
	check := func(rel string, mode os.FileMode) {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(dst, rel))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Errorf("%s: mode %v, want %v", rel, fi.Mode(), mode)
		}
	}
	check("bin", os.ModeDir|0o755)
	check("usr/bin", os.ModeDir|0o755)
	check("bin/busybox", 0o755) // setuid dropped
	check("data", 0o644)        // group/other write dropped
	for link, want := range map[string]string{"bin/sh": "busybox", "usr/bin/env": "/bin/busybox", "etc/passwd": "/etc/shadow", "a/b/up": "../../bin"} {
		if got, err := os.Readlink(filepath.Join(dst, link)); err != nil || got != want {
			t.Errorf("%s -> %q, %v; want %q", link, got, err, want)
		}
	}
	a, _ := os.Stat(filepath.Join(dst, "bin/busybox"))
	b, _ := os.Stat(filepath.Join(dst, "bin/hard"))
	if !os.SameFile(a, b) {
		t.Error("bin/hard is not a hard link of bin/busybox")
	}
}

func TestFailedUnpackLeavesNothing(t *testing.T) {
	h := t.TempDir()
	hexd := strings.Repeat("ab", 32)
	err := unpack(h, hexd, nil, bytes.NewReader(mkTar(t, ent{name: "ok", typ: tar.TypeReg, body: "x"}, ent{name: "../x", typ: tar.TypeReg})))
	if !errors.Is(err, ErrUnsafeLayer) {
		t.Fatalf("unpack = %v", err)
	}
	entries, err := os.ReadDir(image.RootfsBase(h))
	if err != nil || len(entries) != 0 {
		t.Fatalf("after a failed unpack the rootfs directory holds %v (%v)", entries, err)
	}
}
