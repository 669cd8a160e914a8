package pyimage

import (
	"archive/tar"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/imagebuild"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/sdk/python"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// fakeFile is a file of the fake system: its path, content ("" and link
// set: a symlink) and whether its package records a checksum for it.
type fakeFile struct {
	path, body, link string
	pkg              string
	noSum            bool
	conffile         bool
	exec             bool
}

var fakeFiles = []fakeFile{
	{path: "/usr/bin/alpha", body: "#!/bin/sh\necho alpha\n", pkg: "alpha", exec: true},
	{path: "/usr/bin/alpha-link", link: "alpha", pkg: "alpha"},
	{path: "/usr/lib/alpha/data", body: "alpha data\n", pkg: "alpha"},
	{path: "/etc/alpha.conf", body: "setting=1\n", pkg: "alpha", conffile: true},
	{path: "/lib/x86_64-linux-gnu/libbeta.so.1", body: "\x7fELF beta", pkg: "beta"},
	{path: "/lib64/ld-beta.so", link: "/lib/x86_64-linux-gnu/libbeta.so.1", pkg: "beta"},
	{path: "/usr/lib/epsilon.txt", body: "epsilon\n", pkg: "epsilon"},
	{path: "/usr/bin/ess", body: "essential\n", pkg: "ess"},
}

// fakeStatus is dpkg's status file of the fake system. alpha is the root:
// gamma is not installed (beta satisfies that relation), delta is virtual
// (epsilon provides it), ess is Essential (not followed), notinst left only
// its configuration files.
const fakeStatus = `Package: alpha
Status: install ok installed
Architecture: amd64
Version: 1.0-1
Depends: gamma (>= 2) | beta:any (>= 1), delta, ess
Conffiles:
 /etc/alpha.conf CONFSUM
 /etc/alpha.old 00000000000000000000000000000000 obsolete
Description: the root
 more text: with a colon

Package: beta
Status: install ok installed
Multi-Arch: same
Architecture: amd64
Version: 2.0
Pre-Depends: notinst | epsilon

Package: beta
Status: install ok installed
Multi-Arch: same
Architecture: i386
Version: 9.9

Package: epsilon
Status: install ok installed
Architecture: all
Version: 3
Provides: delta (= 1)

Package: ess
Essential: yes
Status: install ok installed
Architecture: amd64
Version: 4

Package: notinst
Status: deinstall ok config-files
Architecture: amd64
Version: 5
`

// infoName is the info file name dpkg uses: name:arch for Multi-Arch:
// same packages.
func infoName(pkg string) string {
	if pkg == "beta" {
		return "beta:amd64"
	}
	return pkg
}

// fakeSystem writes a root filesystem with a dpkg database describing
// fakeFiles (after edit, if any, changes the files) and returns its root.
func fakeSystem(t *testing.T, edit func(root string)) string {
	t.Helper()
	root := t.TempDir()
	admin := filepath.Join(root, "var/lib/dpkg")
	lists := map[string][]string{}
	sums := map[string][]string{}
	status := fakeStatus
	for _, f := range fakeFiles {
		p := filepath.Join(root, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		for d := filepath.Dir(f.path); d != "/"; d = filepath.Dir(d) {
			if !slices.Contains(lists[f.pkg], d) {
				lists[f.pkg] = append(lists[f.pkg], d)
			}
		}
		lists[f.pkg] = append(lists[f.pkg], f.path)
		if f.link != "" {
			if err := os.Symlink(f.link, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		mode := os.FileMode(0o644)
		if f.exec {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(f.body), mode); err != nil {
			t.Fatal(err)
		}
		sum := md5.Sum([]byte(f.body))
		switch {
		case f.conffile:
			status = strings.Replace(status, "CONFSUM", hex.EncodeToString(sum[:]), 1)
		case !f.noSum:
			sums[f.pkg] = append(sums[f.pkg], hex.EncodeToString(sum[:])+"  "+strings.TrimPrefix(f.path, "/"))
		}
	}
	// Documentation the image leaves out, listed but not installed
	// (path-exclude).
	lists["alpha"] = append(lists["alpha"], "/usr/share/doc", "/usr/share/doc/alpha", "/usr/share/doc/alpha/copyright")
	for pkg, l := range lists {
		slices.Sort(l)
		writeFile(t, filepath.Join(admin, "info", infoName(pkg)+".list"), "/.\n"+strings.Join(l, "\n")+"\n")
	}
	for pkg, s := range sums {
		writeFile(t, filepath.Join(admin, "info", infoName(pkg)+".md5sums"), strings.Join(s, "\n")+"\n")
	}
	writeFile(t, filepath.Join(admin, "status"), status)
	if edit != nil {
		edit(root)
	}
	return root
}

func writeFile(t *testing.T, p, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fakeOptions(root string) Options {
	return Options{Root: root, Roots: []string{"alpha"}, Arch: "amd64"}
}

func TestCollect(t *testing.T) {
	root := fakeSystem(t, nil)
	files, c, err := Collect(fakeOptions(root))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]imagebuild.File{}
	for _, f := range files {
		got[f.Name] = f
	}
	want := map[string]imagebuild.File{
		"usr/bin/alpha":                          {Type: tar.TypeReg, Mode: 0o755, Body: []byte("#!/bin/sh\necho alpha\n")},
		"usr/bin/alpha-link":                     {Type: tar.TypeSymlink, Mode: 0o777, Link: "alpha"},
		"usr/lib/alpha/data":                     {Type: tar.TypeReg, Mode: 0o644, Body: []byte("alpha data\n")},
		"etc/alpha.conf":                         {Type: tar.TypeReg, Mode: 0o644, Body: []byte("setting=1\n")},
		"usr/lib/x86_64-linux-gnu/libbeta.so.1":  {Type: tar.TypeReg, Mode: 0o644, Body: []byte("\x7fELF beta")},
		"usr/lib64/ld-beta.so":                   {Type: tar.TypeSymlink, Mode: 0o777, Link: "/lib/x86_64-linux-gnu/libbeta.so.1"},
		"usr/lib/epsilon.txt":                    {Type: tar.TypeReg, Mode: 0o644, Body: []byte("epsilon\n")},
		"lib":                                    {Type: tar.TypeSymlink, Mode: 0o777, Link: "usr/lib"},
		"lib64":                                  {Type: tar.TypeSymlink, Mode: 0o777, Link: "usr/lib64"},
		"usr/lib/x86_64-linux-gnu":               {Type: tar.TypeDir, Mode: 0o755},
		"usr/lib64":                              {Type: tar.TypeDir, Mode: 0o755},
		"etc":                                    {Type: tar.TypeDir, Mode: 0o755},
		strings.TrimPrefix(python.ShimPath, "/"): {Type: tar.TypeReg, Mode: 0o644, Body: python.Shim},
		strings.TrimPrefix(python.AgentShimPath, "/"): {Type: tar.TypeReg, Mode: 0o644, Body: python.AgentShim},
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if g.Type != w.Type || g.Mode != w.Mode || string(g.Body) != string(w.Body) || g.Link != w.Link {
			t.Errorf("%s = %c %o %q -> %q, want %c %o %q -> %q", name, g.Type, g.Mode, g.Body, g.Link, w.Type, w.Mode, w.Body, w.Link)
		}
	}
	for name := range got {
		if strings.Contains(name, "share/doc") || name == "usr/bin/ess" {
			t.Errorf("%s is in the image", name)
		}
	}
	var names []string
	for _, p := range c.Packages {
		names = append(names, p.Name+"="+p.Version+"/"+p.Arch)
	}
	if w := []string{"alpha=1.0-1/amd64", "beta=2.0/amd64", "epsilon=3/all"}; !slices.Equal(names, w) {
		t.Errorf("packages %v, want %v", names, w)
	}
	if !slices.Equal(c.Skipped, []string{"ess"}) {
		t.Errorf("skipped %v, want [ess]", c.Skipped)
	}
	if c.Files != 7 || c.Entries != len(files) {
		t.Errorf("contents %+v for %d files", c, len(files))
	}
}

// TestCollectRefuses: a file that does not match its checksum or has none,
// a package that is not fully there, a dependency nothing satisfies: the
// build stops.
func TestCollectRefuses(t *testing.T) {
	cases := []struct {
		name string
		edit func(root string)
		want error
		msg  string
	}{
		{"file changed", func(root string) { writeFile(t, filepath.Join(root, "usr/lib/alpha/data"), "alpha datA\n") }, ErrChecksum, "usr/lib/alpha/data"},
		{"library changed", func(root string) {
			writeFile(t, filepath.Join(root, "lib/x86_64-linux-gnu/libbeta.so.1"), "\x7fELF evil")
		}, ErrChecksum, "libbeta.so.1"},
		{"conffile changed", func(root string) { writeFile(t, filepath.Join(root, "etc/alpha.conf"), "setting=2\n") }, ErrChecksum, "alpha.conf"},
		{"file replaced by a symlink", func(root string) {
			p := filepath.Join(root, "usr/lib/alpha/data")
			os.Remove(p)
			os.Symlink("/etc/shadow", p)
		}, ErrChecksum, "symlink"},
		{"file without a checksum", func(root string) {
			p := filepath.Join(root, "var/lib/dpkg/info/alpha.list")
			b, _ := os.ReadFile(p)
			writeFile(t, filepath.Join(root, "usr/lib/alpha/unlisted"), "x")
			writeFile(t, p, string(b)+"/usr/lib/alpha/unlisted\n")
		}, ErrChecksum, "no checksum"},
		{"file missing", func(root string) { os.Remove(filepath.Join(root, "usr/lib/epsilon.txt")) }, ErrPackage, "epsilon.txt"},
		{"file list missing", func(root string) { os.Remove(filepath.Join(root, "var/lib/dpkg/info/beta:amd64.list")) }, ErrPackage, "beta has no list"},
		{"dependency not installed", func(root string) {
			p := filepath.Join(root, "var/lib/dpkg/status")
			b, _ := os.ReadFile(p)
			writeFile(t, p, strings.Replace(string(b), "Version: 3\nProvides: delta (= 1)\n", "Version: 3\n", 1))
		}, ErrPackage, `"delta"`},
		{"relative path in a list", func(root string) {
			p := filepath.Join(root, "var/lib/dpkg/info/alpha.list")
			b, _ := os.ReadFile(p)
			writeFile(t, p, string(b)+"/usr/../etc/shadow\n")
		}, ErrPackage, "lists"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeSystem(t, tc.edit)
			_, _, err := Collect(fakeOptions(root))
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
}

var (
	forwarderOnce sync.Once
	forwarderBin  string
	forwarderErr  error
)

// baseOptions are the default image's inputs: the host's busybox and the
// egress forwarder built from this tree, once per test process.
func baseOptions(t *testing.T) imagebuild.BuildOptions {
	t.Helper()
	if _, err := os.Stat(imagebuild.DefaultBusybox); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s: %v (install busybox-static)", imagebuild.DefaultBusybox, err)
		}
		t.Skipf("%s: %v (install busybox-static)", imagebuild.DefaultBusybox, err)
	}
	forwarderOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pyimage-test-forwarder-")
		if err != nil {
			forwarderErr = err
			return
		}
		forwarderBin = filepath.Join(dir, imagebuild.ForwarderName)
		forwarderErr = sandboxtest.BuildForwarder(context.Background(), forwarderBin)
	})
	if forwarderErr != nil {
		t.Fatal(forwarderErr)
	}
	return imagebuild.BuildOptions{BusyboxPath: imagebuild.DefaultBusybox, ForwarderPath: forwarderBin}
}

// TestBuildFakeReproducible: the same packages give the same digests in
// two homes; a package file changed (with its checksum, as an upgrade
// would) gives another image.
func TestBuildFakeReproducible(t *testing.T) {
	base := baseOptions(t)
	build := func(root string) *image.Image {
		t.Helper()
		opts := fakeOptions(root)
		opts.Base = base
		img, _, err := Build(t.TempDir(), opts)
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	a := build(fakeSystem(t, nil))
	b := build(fakeSystem(t, nil))
	if a.ManifestDigest != b.ManifestDigest || a.ConfigDigest != b.ConfigDigest {
		t.Fatalf("same packages, two images: %+v, %+v", a, b)
	}
	if !strings.HasPrefix(a.Ref, Name+"@sha256:") {
		t.Errorf("ref %s", a.Ref)
	}
	saved := fakeFiles
	t.Cleanup(func() { fakeFiles = saved })
	fakeFiles = slices.Clone(saved)
	fakeFiles[2].body = "alpha data, version 2\n"
	c := build(fakeSystem(t, nil))
	if c.ManifestDigest == a.ManifestDigest || c.ConfigDigest == a.ConfigDigest {
		t.Fatal("a changed package file gives the same image")
	}
}

// TestCollectExclude: an excluded path is left out with everything below
// it, unread, so a file there that fails its checksum does not stop the
// build; a path that only shares a prefix is kept.
func TestCollectExclude(t *testing.T) {
	root := fakeSystem(t, func(root string) {
		writeFile(t, filepath.Join(root, "usr/lib/alpha/data"), "rewritten by the host\n")
	})
	if _, _, err := Collect(fakeOptions(root)); !errors.Is(err, ErrChecksum) {
		t.Fatalf("without Exclude: %v, want ErrChecksum", err)
	}
	opts := fakeOptions(root)
	opts.Exclude = []string{"/usr/lib/alpha", "/usr/bin/alph"}
	files, _, err := Collect(opts)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if slices.Contains(names, "usr/lib/alpha/data") || slices.Contains(names, "usr/lib/alpha") {
		t.Errorf("excluded paths in the image: %v", names)
	}
	if !slices.Contains(names, "usr/bin/alpha") {
		t.Errorf("usr/bin/alpha (only a prefix of an exclusion) missing: %v", names)
	}
}
