package imagebuild

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// TestImageCarriesTheForwarder: the forwarder is in the rootfs at the
// profile's path, byte for byte, executable; the socket's mount point is an
// empty regular file; the history names the forwarder's hash.
func TestImageCarriesTheForwarder(t *testing.T) {
	fwd := testForwarder(t)
	img := build(t, t.TempDir(), hostBusybox(t))
	want, err := os.ReadFile(fwd)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(img.Rootfs, profile.EgressForwarderPath))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("rootfs forwarder differs from %s (%d vs %d bytes, %v)", fwd, len(got), len(want), err)
	}
	fi, err := os.Stat(filepath.Join(img.Rootfs, profile.EgressForwarderPath))
	if err != nil || fi.Mode().Perm()&0o111 != 0o111 {
		t.Errorf("forwarder mode %v, %v", fi.Mode(), err)
	}
	mp, err := os.Lstat(filepath.Join(img.Rootfs, profile.EgressSocketPath))
	if err != nil || !mp.Mode().IsRegular() || mp.Size() != 0 {
		t.Errorf("socket mount point: %v, %v; want an empty regular file", mp, err)
	}
	cfg := blob(t, img, img.ConfigDigest)
	if !bytes.Contains(cfg, []byte("egress forwarder "+sha256Hash(want).String())) {
		t.Errorf("config history does not name the forwarder's hash: %s", cfg)
	}
}

// TestDifferentForwarderDifferentDigest: the digest pins the forwarder.
func TestDifferentForwarderDifferentDigest(t *testing.T) {
	bb := hostBusybox(t)
	data, err := os.ReadFile(testForwarder(t))
	if err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(t.TempDir(), ForwarderName)
	if err := os.WriteFile(changed, append(data, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	h := t.TempDir()
	a := build(t, h, bb)
	b, err := Build(h, BuildOptions{BusyboxPath: bb, ForwarderPath: changed})
	if err != nil {
		t.Fatal(err)
	}
	if a.ManifestDigest == b.ManifestDigest {
		t.Fatal("one byte more in the forwarder, same digest")
	}
}

// TestBuildRefusesBadForwarder: missing, dynamic or not an ELF: an error
// naming the forwarder, and nothing written.
func TestBuildRefusesBadForwarder(t *testing.T) {
	bb := hostBusybox(t)
	text := filepath.Join(t.TempDir(), "fwd.sh")
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path   string
		static bool // the error is ErrNotStatic
	}{
		{"/nonexistent/" + ForwarderName, false},
		{"/bin/ls", true}, // dynamically linked
		{text, true},
		{t.TempDir(), false}, // a directory
	} {
		h := t.TempDir()
		_, err := Build(h, BuildOptions{BusyboxPath: bb, ForwarderPath: c.path})
		if err == nil || !strings.Contains(err.Error(), "egress forwarder") {
			t.Errorf("Build with forwarder %s: %v, want an error naming the egress forwarder", c.path, err)
		}
		if c.static != errors.Is(err, ErrNotStatic) {
			t.Errorf("Build with forwarder %s: %v, ErrNotStatic %v", c.path, err, c.static)
		}
		if _, err := os.Stat(filepath.Join(h, "images")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Build with forwarder %s failed but wrote %s/images", c.path, h)
		}
	}
}

// TestForwarderDefaultsNextToExecutable: without ForwarderPath the
// forwarder is bin/agentnode-forwarder beside the running binary.
func TestForwarderDefaultsNextToExecutable(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := forwarderPath("")
	if err != nil || p != filepath.Join(filepath.Dir(exe), ForwarderName) {
		t.Fatalf("forwarderPath = %q, %v", p, err)
	}
	if p, _ := forwarderPath("/x/y"); p != "/x/y" {
		t.Errorf("an explicit path is replaced: %q", p)
	}
	if _, err := os.Stat(p); err == nil {
		t.Skipf("%s exists; not testing the missing case", p)
	}
	_, err = Build(t.TempDir(), BuildOptions{BusyboxPath: hostBusybox(t)})
	if err == nil || !strings.Contains(err.Error(), ForwarderName) || !strings.Contains(err.Error(), "make build") {
		t.Errorf("Build without a forwarder beside the executable: %v", err)
	}
}
