package imagebuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/agentnode/agentnode/kernel/hashcache"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// hostBusybox returns /bin/busybox, skipping when it is not installed
// (failing instead when CI is set: CI installs busybox-static).
func hostBusybox(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(DefaultBusybox); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s: %v (install busybox-static)", DefaultBusybox, err)
		}
		t.Skipf("%s: %v (install busybox-static)", DefaultBusybox, err)
	}
	return DefaultBusybox
}

var (
	forwarderOnce sync.Once
	forwarderBin  string
	forwarderErr  error
)

// testForwarder builds the egress forwarder once per test process, the way
// `make build` does.
func testForwarder(t testing.TB) string {
	t.Helper()
	forwarderOnce.Do(func() {
		dir, err := os.MkdirTemp("", "image-test-forwarder-")
		if err != nil {
			forwarderErr = err
			return
		}
		forwarderBin = filepath.Join(dir, ForwarderName)
		forwarderErr = sandboxtest.BuildForwarder(context.Background(), forwarderBin)
	})
	if forwarderErr != nil {
		t.Fatal(forwarderErr)
	}
	return forwarderBin
}

func build(t testing.TB, homeDir, busybox string) *image.Image {
	t.Helper()
	img, err := Build(homeDir, BuildOptions{BusyboxPath: busybox, ForwarderPath: testForwarder(t)})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return img
}

func blob(t testing.TB, img *image.Image, digest string) []byte {
	t.Helper()
	data, err := os.ReadFile(image.BlobPath(img.Layout, strings.TrimPrefix(digest, "sha256:")))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func manifestOf(t testing.TB, img *image.Image) *v1.Manifest {
	t.Helper()
	m, err := v1.ParseManifest(bytes.NewReader(blob(t, img, img.ManifestDigest)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBuildIsReproducible(t *testing.T) {
	bb := hostBusybox(t)
	h1, h2 := t.TempDir(), t.TempDir()
	a, b := build(t, h1, bb), build(t, h2, bb)
	if a.ManifestDigest != b.ManifestDigest || a.ConfigDigest != b.ConfigDigest {
		t.Fatalf("two builds differ: %s/%s vs %s/%s", a.ManifestDigest, a.ConfigDigest, b.ManifestDigest, b.ConfigDigest)
	}
	if a.Ref != image.DefaultName+"@"+a.ManifestDigest {
		t.Errorf("Ref = %q", a.Ref)
	}
	for _, rel := range []string{"oci/index.json", "oci/oci-layout", "rootfs/" + strings.TrimPrefix(a.ManifestDigest, "sha256:") + ".treehash"} {
		x, err1 := os.ReadFile(filepath.Join(h1, "images", rel))
		y, err2 := os.ReadFile(filepath.Join(h2, "images", rel))
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs between the builds (%v, %v)", rel, err1, err2)
		}
	}
	// Building again into the same home is a no-op.
	c := build(t, h1, bb)
	if *c != *a {
		t.Errorf("rebuild = %+v, want %+v", c, a)
	}
	imgs, err := Status(h1)
	if err != nil || len(imgs) != 1 {
		t.Fatalf("Status after two builds = %v, %v; want one image", imgs, err)
	}
	if imgs[0].Ref != a.Ref || imgs[0].ConfigDigest != a.ConfigDigest || imgs[0].Rootfs != a.Rootfs {
		t.Errorf("Status = %+v, want %+v", imgs[0], a)
	}
	if _, err := image.Resolve(h1, a.Ref); err != nil {
		t.Errorf("Resolve after rebuild: %v", err)
	}
}

func TestDifferentBusyboxDifferentDigest(t *testing.T) {
	bb := hostBusybox(t)
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(t.TempDir(), "busybox")
	if err := os.WriteFile(changed, append(data, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	h := t.TempDir()
	a, b := build(t, h, bb), build(t, h, changed)
	if a.ManifestDigest == b.ManifestDigest || a.ConfigDigest == b.ConfigDigest {
		t.Fatalf("one byte more in busybox, same digests: %+v", a)
	}
	imgs, err := Status(h)
	if err != nil || len(imgs) != 2 {
		t.Fatalf("Status = %v, %v; want both images", imgs, err)
	}
	for _, img := range []*image.Image{a, b} {
		if _, err := image.Resolve(h, img.Ref); err != nil {
			t.Errorf("image.Resolve(%s): %v", img.Ref, err)
		}
	}
}

func TestBuildRefusesNonStaticBusybox(t *testing.T) {
	text := filepath.Join(t.TempDir(), "busybox")
	if err := os.WriteFile(text, []byte("#!/bin/sh\necho BusyBox v1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/bin/ls", text} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		h := t.TempDir()
		_, err := Build(h, BuildOptions{BusyboxPath: p, ForwarderPath: testForwarder(t)})
		if !errors.Is(err, ErrNotStatic) {
			t.Errorf("Build(%s) = %v, want ErrNotStatic", p, err)
		}
		if _, err := os.Stat(filepath.Join(h, "images")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Build(%s) failed but wrote %s/images", p, h)
		}
	}
	if _, err := Build(t.TempDir(), BuildOptions{BusyboxPath: "/nonexistent/busybox", ForwarderPath: testForwarder(t)}); err == nil {
		t.Error("Build with a missing busybox succeeded")
	}
}

func TestLayerAndConfigAreFixed(t *testing.T) {
	img := build(t, t.TempDir(), hostBusybox(t))
	m := manifestOf(t, img)
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 1 ||
		m.Layers[0].MediaType != types.OCILayer {
		t.Fatalf("manifest = %+v", m)
	}
	if len(m.Annotations) != 0 {
		t.Errorf("manifest annotations %v", m.Annotations)
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(blob(t, img, img.ConfigDigest)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Architecture != "amd64" || cfg.OS != "linux" || !cfg.Created.Time.Equal(epoch) ||
		cfg.Config.User != "1000:1000" || cfg.Config.WorkingDir != "/tmp" ||
		strings.Join(cfg.Config.Env, ",") != "PATH=/bin:/usr/bin" {
		t.Errorf("config = %+v", cfg)
	}
	for _, h := range cfg.History {
		if !h.Created.Time.Equal(epoch) {
			t.Errorf("history entry created %v", h.Created)
		}
	}

	gz := blob(t, img, m.Layers[0].Digest.String())
	// RFC 1952: FLG (byte 3) 0 = no name, comment or extra; MTIME (4-7) 0.
	if len(gz) < 10 || gz[0] != 0x1f || gz[1] != 0x8b || gz[3] != 0 || !bytes.Equal(gz[4:8], []byte{0, 0, 0, 0}) {
		t.Fatalf("gzip header % x", gz[:10])
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	byName := map[string]*tar.Header{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		owner := 0
		if hdr.Name == "sandbox-home/" {
			owner = 1000 // the sandbox user's home
		}
		if hdr.ModTime.Unix() != 0 || hdr.Uid != owner || hdr.Gid != owner || hdr.Uname != "" || hdr.Gname != "" {
			t.Errorf("%s: mtime %v uid %d gid %d", hdr.Name, hdr.ModTime, hdr.Uid, hdr.Gid)
		}
		names = append(names, hdr.Name)
		byName[hdr.Name] = hdr
	}
	if h := byName["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/ must be 1777 (runc 1.1 copies it onto the tmpfs): %+v", h)
	}
	if h := byName["sandbox-home/"]; h == nil || h.Mode != 0o700 {
		t.Errorf("sandbox-home/ must be 0700: %+v", h)
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("tar entries not sorted: %v", names)
	}
	want := map[string]byte{"bin/busybox": tar.TypeReg, "etc/passwd": tar.TypeReg, "etc/group": tar.TypeReg,
		"tmp/": tar.TypeDir, "sandbox-home/": tar.TypeDir, "pack/": tar.TypeDir, "proc/": tar.TypeDir,
		"sys/": tar.TypeDir, "dev/": tar.TypeDir, "usr/bin/": tar.TypeDir,
		"usr/libexec/agentnode/egress-forwarder": tar.TypeReg, "run/agentnode/egress.sock": tar.TypeReg}
	for _, a := range Applets {
		want["bin/"+a] = tar.TypeSymlink
	}
	for n, typ := range want {
		if h := byName[n]; h == nil || h.Typeflag != typ {
			t.Errorf("layer entry %s missing or of the wrong type", n)
		}
	}
	if h := byName["bin/sh"]; h == nil || h.Linkname != "busybox" {
		t.Errorf("bin/sh = %+v", h)
	}
	passwd, err := os.ReadFile(filepath.Join(img.Rootfs, "etc", "passwd"))
	if err != nil || !strings.Contains(string(passwd), "sandbox:x:1000:1000:") {
		t.Errorf("rootfs /etc/passwd = %q, %v", passwd, err)
	}
}

func TestRootfsIsReadOnlyAndRootOwned(t *testing.T) {
	img := build(t, t.TempDir(), hostBusybox(t))
	err := filepath.WalkDir(img.Rootfs, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink == 0 && fi.Mode().Perm()&0o222 != 0 {
			t.Errorf("%s is writable: %v", p, fi.Mode())
		}
		if d.IsDir() && fi.Mode().Perm() != 0o555 {
			t.Errorf("%s: mode %v, want dr-xr-xr-x", p, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(img.Rootfs, "bin", "sh")); err != nil || target != "busybox" {
		t.Errorf("bin/sh -> %q, %v", target, err)
	}
	// The staging directory is gone.
	entries, _ := os.ReadDir(image.RootfsBase(filepath.Dir(filepath.Dir(img.Layout))))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".staging") {
			t.Errorf("staging directory %s left behind", e.Name())
		}
	}
}

// writable makes p (and its directory) writable for the test and returns a
// function restoring the modes. As root it changes nothing.
func writable(t *testing.T, p string) func() {
	t.Helper()
	if os.Geteuid() == 0 {
		return func() {}
	}
	var restore []func()
	for _, q := range []string{filepath.Dir(p), p} {
		fi, err := os.Lstat(q)
		if err != nil {
			continue
		}
		if err := os.Chmod(q, fi.Mode().Perm()|0o200); err != nil {
			t.Fatal(err)
		}
		q, mode := q, fi.Mode().Perm()
		restore = append(restore, func() { _ = os.Chmod(q, mode) })
	}
	return func() {
		for _, f := range restore {
			f()
		}
	}
}

func TestResolve(t *testing.T) {
	// Each copy is verified once before it is tampered with, late enough
	// for its files' digests to be cached (kernel/hashcache): tampering
	// after a cached verification is caught all the same.
	oldSettle := hashcache.Settle
	hashcache.Settle = 20 * time.Millisecond
	t.Cleanup(func() { hashcache.Settle = oldSettle })
	bb := hostBusybox(t)
	template := filepath.Join(t.TempDir(), "home")
	built := build(t, template, bb)
	zero := "sha256:" + strings.Repeat("0", 64)
	absent := "sha256:" + strings.Repeat("ab", 32)
	cases := []struct {
		name   string
		ref    func(img *image.Image) string
		tamper func(t *testing.T, h string, img *image.Image)
		want   error
		substr string
		// norebuild: skip the rebuild that must repair the damage (a
		// build is slow under the race detector; the repair of the
		// index is checked by "corrupt index").
		norebuild bool
	}{
		{name: "ok", want: nil},
		{name: "placeholder", ref: func(*image.Image) string { return image.DefaultName + "@" + zero }, want: reason.ErrImageUnpinned, substr: "agentnode sandbox build"},
		{name: "tag", ref: func(*image.Image) string { return image.DefaultName + ":latest" }, want: reason.ErrImageUnpinned},
		{name: "no digest", ref: func(*image.Image) string { return image.DefaultName }, want: reason.ErrImageUnpinned},
		{name: "short digest", ref: func(*image.Image) string { return image.DefaultName + "@sha256:abc" }, want: reason.ErrImageUnpinned},
		{name: "upper-case digest", ref: func(img *image.Image) string { return strings.ToUpper(img.Ref) }, want: reason.ErrImageUnpinned},
		{name: "sha512", ref: func(img *image.Image) string { return image.DefaultName + "@sha512:" + strings.Repeat("a", 128) }, want: reason.ErrImageUnpinned},
		{name: "tag and digest", ref: func(img *image.Image) string { return image.DefaultName + ":latest@" + img.ManifestDigest }, want: reason.ErrImageUnpinned},
		{name: "empty", ref: func(*image.Image) string { return "" }, want: reason.ErrImageUnpinned},
		{name: "missing manifest", ref: func(*image.Image) string { return image.DefaultName + "@" + absent }, want: reason.ErrSandboxUnavailable, substr: image.ImageMissing},
		{name: "no layout", tamper: func(t *testing.T, h string, img *image.Image) {
			if err := os.RemoveAll(img.Layout); err != nil {
				t.Fatal(err)
			}
		}, want: reason.ErrSandboxUnavailable, substr: image.ImageMissing},
		{name: "tampered manifest", tamper: func(t *testing.T, h string, img *image.Image) {
			p := image.BlobPath(img.Layout, strings.TrimPrefix(img.ManifestDigest, "sha256:"))
			data, _ := os.ReadFile(p)
			writeFile(t, p, bytes.Replace(data, []byte(`"schemaVersion":2`), []byte(`"schemaVersion":2 `), 1))
		}, want: reason.ErrImageDigestMismatch},
		{name: "corrupt index", tamper: func(t *testing.T, h string, img *image.Image) {
			writeFile(t, filepath.Join(img.Layout, "index.json"), []byte(`{"schemaVersion":2,"manifests":[{"mediaType":`))
		}, want: reason.ErrImageDigestMismatch, substr: "index.json"},
		{name: "index without the image", tamper: func(t *testing.T, h string, img *image.Image) {
			p := filepath.Join(img.Layout, "index.json")
			data, _ := os.ReadFile(p)
			writeFile(t, p, bytes.Replace(data, []byte(strings.TrimPrefix(img.ManifestDigest, "sha256:")), []byte(strings.Repeat("ab", 32)), 1))
		}, want: reason.ErrImageDigestMismatch, substr: "does not list", norebuild: true},
		{name: "missing index", tamper: func(t *testing.T, h string, img *image.Image) {
			if err := os.Remove(filepath.Join(img.Layout, "index.json")); err != nil {
				t.Fatal(err)
			}
		}, want: reason.ErrSandboxUnavailable, substr: image.ImageMissing, norebuild: true},
		{name: "tampered config", tamper: func(t *testing.T, h string, img *image.Image) {
			p := image.BlobPath(img.Layout, strings.TrimPrefix(img.ConfigDigest, "sha256:"))
			data, _ := os.ReadFile(p)
			writeFile(t, p, bytes.Replace(data, []byte(`"User":"1000:1000"`), []byte(`"User":"0:0"`), 1))
		}, want: reason.ErrImageDigestMismatch},
		{name: "missing config", tamper: func(t *testing.T, h string, img *image.Image) {
			if err := os.Remove(image.BlobPath(img.Layout, strings.TrimPrefix(img.ConfigDigest, "sha256:"))); err != nil {
				t.Fatal(err)
			}
		}, want: reason.ErrSandboxUnavailable, substr: image.ImageMissing},
		{name: "rootfs file one byte", tamper: func(t *testing.T, h string, img *image.Image) {
			p := filepath.Join(img.Rootfs, "bin", "busybox")
			defer writable(t, p)()
			orig, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{orig[1000] ^ 0xff}, 1000); err != nil {
				t.Fatal(err)
			}
		}, want: reason.ErrImageDigestMismatch, substr: "modified"},
		{name: "rootfs file rewritten with its size and times kept", tamper: func(t *testing.T, h string, img *image.Image) {
			// What would fool a cache keyed on size and mtime: the
			// digest cached before must not vouch for the new bytes.
			p := filepath.Join(img.Rootfs, "etc", "passwd")
			defer writable(t, p)()
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(p)
			writeInPlace(t, p, bytes.Replace(data, []byte("sandbox:x:1000:1000"), []byte("sandbox:x:0000:1000"), 1))
			if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}, want: reason.ErrImageDigestMismatch, substr: "modified"},
		{name: "rootfs passwd", tamper: func(t *testing.T, h string, img *image.Image) {
			p := filepath.Join(img.Rootfs, "etc", "passwd")
			defer writable(t, p)()
			data, _ := os.ReadFile(p)
			writeInPlace(t, p, bytes.Replace(data, []byte("sandbox:x:1000:1000"), []byte("sandbox:x:0000:1000"), 1))
		}, want: reason.ErrImageDigestMismatch},
		{name: "file added to rootfs", tamper: func(t *testing.T, h string, img *image.Image) {
			p := filepath.Join(img.Rootfs, "tmp", "x")
			defer writable(t, p)()
			writeInPlace(t, p, nil)
		}, want: reason.ErrImageDigestMismatch},
		{name: "symlink retargeted", tamper: func(t *testing.T, h string, img *image.Image) {
			p := filepath.Join(img.Rootfs, "bin", "sh")
			defer writable(t, p)()
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/pack/evil", p); err != nil {
				t.Fatal(err)
			}
		}, want: reason.ErrImageDigestMismatch},
		{name: "mode changed", tamper: func(t *testing.T, h string, img *image.Image) {
			if err := os.Chmod(filepath.Join(img.Rootfs, "bin", "busybox"), os.ModeSetuid|0o555); err != nil {
				t.Fatal(err)
			}
		}, want: reason.ErrImageDigestMismatch},
		{name: "missing rootfs", tamper: func(t *testing.T, h string, img *image.Image) {
			if err := removeTree(img.Rootfs); err != nil {
				t.Fatal(err)
			}
		}, want: reason.ErrSandboxUnavailable, substr: image.ImageMissing},
		{name: "rootfs replaced by symlink", tamper: func(t *testing.T, h string, img *image.Image) {
			if err := removeTree(img.Rootfs); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/", img.Rootfs); err != nil {
				t.Fatal(err)
			}
		}, want: reason.ErrImageDigestMismatch},
		{name: "missing marker", tamper: func(t *testing.T, h string, img *image.Image) {
			if err := os.Remove(image.MarkerPath(h, strings.TrimPrefix(img.ManifestDigest, "sha256:"))); err != nil {
				t.Fatal(err)
			}
		}, want: reason.ErrImageDigestMismatch},
		{name: "marker of other layers", tamper: func(t *testing.T, h string, img *image.Image) {
			p := image.MarkerPath(h, strings.TrimPrefix(img.ManifestDigest, "sha256:"))
			var m image.Marker
			data, _ := os.ReadFile(p)
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			m.DiffIDs = []v1.Hash{{Algorithm: "sha256", Hex: strings.Repeat("cd", 32)}}
			data, _ = json.Marshal(m)
			writeFile(t, p, data)
		}, want: reason.ErrImageDigestMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A copy of one built home: building (gzip of the layer) is
			// slow under the race detector.
			h := filepath.Join(t.TempDir(), "home")
			if out, err := exec.Command("cp", "-a", template, h).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v: %s", err, out)
			}
			time.Sleep(2 * hashcache.Settle) // the copy's files settle
			img, err := image.Resolve(h, built.Ref)
			if err != nil {
				t.Fatalf("Resolve of the untouched copy: %v", err)
			}
			cached := hashcache.Read(image.HashCachePath(h, strings.TrimPrefix(img.ManifestDigest, "sha256:")))
			if _, ok := cached[filepath.Join(img.Rootfs, "bin", "busybox")]; !ok {
				t.Fatalf("Resolve did not cache the digest of bin/busybox (cache %d entries)", len(cached))
			}
			if tc.tamper != nil {
				tc.tamper(t, h, img)
			}
			ref := img.Ref
			if tc.ref != nil {
				ref = tc.ref(img)
			}
			got, err := image.Resolve(h, ref)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Resolve: %v", err)
				}
				if *got != *img {
					t.Fatalf("Resolve = %+v, want %+v", got, img)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Resolve = %v, %v; want %v", got, err, reason.CodeOf(tc.want))
			}
			if got != nil {
				t.Errorf("Resolve returned an image with the error: %+v", got)
			}
			if !strings.Contains(err.Error(), tc.substr) {
				t.Errorf("error %q does not mention %q", err, tc.substr)
			}
			if tc.tamper != nil && tc.ref == nil && !tc.norebuild {
				// Building again repairs the image.
				if again := build(t, h, bb); again.Ref != img.Ref {
					t.Fatalf("rebuild gave %s", again.Ref)
				}
				if _, err := image.Resolve(h, img.Ref); err != nil {
					t.Errorf("Resolve after rebuild: %v", err)
				}
				entries, _ := os.ReadDir(image.RootfsBase(h))
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				mhex := strings.TrimPrefix(img.ManifestDigest, "sha256:")
				if strings.Join(names, " ") != mhex+" "+mhex+".treehash" {
					t.Errorf("after the rebuild %s holds %v", image.RootfsBase(h), names)
				}
			}
		})
	}
}

// writeFile replaces p atomically (a blob or marker).
func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.WriteFile(p+".new", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".new", p); err != nil {
		t.Fatal(err)
	}
}

// writeInPlace writes p without replacing its inode (creating it if needed).
func writeInPlace(t *testing.T, p string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkResolve measures the check made before every sandboxed run.
func BenchmarkResolve(b *testing.B) {
	h := b.TempDir()
	img := build(b, h, hostBusybox(b))
	b.ResetTimer()
	for b.Loop() {
		if _, err := image.Resolve(h, img.Ref); err != nil {
			b.Fatal(err)
		}
	}
}
