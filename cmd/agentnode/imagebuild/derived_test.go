package imagebuild

import (
	"archive/tar"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/image"
)

func buildDerived(t *testing.T, homeDir string, d Derived) (*image.Image, error) {
	t.Helper()
	return BuildDerived(homeDir, BuildOptions{BusyboxPath: hostBusybox(t), ForwarderPath: testForwarder(t)}, d)
}

// TestBuildDerived: the default image's content plus the given files, with
// missing parents, under its own name; reproducible, resolvable, and the
// default image's digest is not touched.
func TestBuildDerived(t *testing.T) {
	d := Derived{
		Name: "agentnode/derived-test",
		Files: []File{
			{Name: "usr/lib/x/data.txt", Type: tar.TypeReg, Mode: 0o644, Body: []byte("data\n")},
			{Name: "usr/lib/x/run", Type: tar.TypeReg, Mode: 0o755, Body: []byte("#!/bin/sh\n")},
			{Name: "usr/lib/x/link", Type: tar.TypeSymlink, Mode: 0o777, Link: "data.txt"},
			{Name: "etc/", Type: tar.TypeDir, Mode: 0o755}, // the base's directory
		},
		Cmd:       []string{"/usr/lib/x/run"},
		CreatedBy: "derived test",
	}
	h1, h2 := t.TempDir(), t.TempDir()
	a, err := buildDerived(t, h1, d)
	if err != nil {
		t.Fatal(err)
	}
	b, err := buildDerived(t, h2, d)
	if err != nil {
		t.Fatal(err)
	}
	if a.ManifestDigest != b.ManifestDigest || a.ConfigDigest != b.ConfigDigest || a.Name != d.Name {
		t.Fatalf("two builds: %+v and %+v", a, b)
	}
	if _, err := image.Resolve(h1, a.Ref); err != nil {
		t.Fatalf("image.Resolve(%s): %v", a.Ref, err)
	}
	base := build(t, t.TempDir(), hostBusybox(t))
	if base.ManifestDigest == a.ManifestDigest {
		t.Fatal("derived image has the default image's digest")
	}
	if got, err := os.ReadFile(filepath.Join(a.Rootfs, "usr/lib/x/data.txt")); err != nil || string(got) != "data\n" {
		t.Errorf("data.txt = %q, %v", got, err)
	}
	if fi, err := os.Stat(filepath.Join(a.Rootfs, "usr/lib/x/run")); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("run: %v, %v", fi, err)
	}
	if l, err := os.Readlink(filepath.Join(a.Rootfs, "usr/lib/x/link")); err != nil || l != "data.txt" {
		t.Errorf("link -> %q, %v", l, err)
	}
	if _, err := os.Stat(filepath.Join(a.Rootfs, "bin/busybox")); err != nil {
		t.Errorf("the base's busybox: %v", err)
	}
	cfg := manifestOf(t, a).Config.Digest.String()
	if cfg != a.ConfigDigest || !strings.Contains(string(blob(t, a, cfg)), `"Cmd":["/usr/lib/x/run"]`) {
		t.Errorf("config %s: %s", cfg, blob(t, a, cfg))
	}
	// Any change of a file is another image.
	d2 := d
	d2.Files = append([]File(nil), d.Files...)
	d2.Files[0].Body = []byte("data!\n")
	c, err := buildDerived(t, t.TempDir(), d2)
	if err != nil {
		t.Fatal(err)
	}
	if c.ManifestDigest == a.ManifestDigest || c.ConfigDigest == a.ConfigDigest {
		t.Fatal("a changed file gives the same digests")
	}
}

func TestBuildDerivedRefuses(t *testing.T) {
	reg := func(name string) File { return File{Name: name, Type: tar.TypeReg, Mode: 0o644, Body: []byte("x")} }
	cases := []struct {
		name   string
		d      Derived
		unsafe bool
	}{
		{"default name", Derived{Name: image.DefaultName}, false},
		{"no name", Derived{}, false},
		{"a base file again", Derived{Name: "t/x", Files: []File{reg("etc/passwd")}}, false},
		{"a file twice", Derived{Name: "t/x", Files: []File{reg("a"), reg("a")}}, false},
		{"a file over a base directory", Derived{Name: "t/x", Files: []File{reg("usr/bin")}}, false},
		{"absolute", Derived{Name: "t/x", Files: []File{reg("/etc/x")}}, true},
		{"dot-dot", Derived{Name: "t/x", Files: []File{reg("../x")}}, true},
		{"unclean", Derived{Name: "t/x", Files: []File{reg("usr//x")}}, true},
		{"setuid", Derived{Name: "t/x", Files: []File{{Name: "x", Type: tar.TypeReg, Mode: 0o4755}}}, true},
		{"device", Derived{Name: "t/x", Files: []File{{Name: "x", Type: tar.TypeChar, Mode: 0o644}}}, true},
		{"symlink out", Derived{Name: "t/x", Files: []File{{Name: "usr/x", Type: tar.TypeSymlink, Link: "../../etc"}}}, true},
		{"name too long for USTAR", Derived{Name: "t/x", Files: []File{reg(strings.Repeat("a", 300))}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			img, err := buildDerived(t, home, tc.d)
			if err == nil {
				t.Fatalf("built %+v", img)
			}
			if tc.unsafe != errors.Is(err, ErrUnsafeLayer) {
				t.Fatalf("err = %v; ErrUnsafeLayer: want %v", err, tc.unsafe)
			}
			if imgs, _ := Status(home); len(imgs) != 0 {
				t.Fatalf("an image was installed: %+v", imgs)
			}
		})
	}
}
