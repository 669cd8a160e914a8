package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/imagestore"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// TestCheckEgressImage: the forwarder and the socket's mount point must be
// regular files reached without symlinks.
func TestCheckEgressImage(t *testing.T) {
	mk := func(t *testing.T, edit func(root string)) string {
		root := t.TempDir()
		for _, p := range []string{profile.EgressForwarderPath, profile.EgressSocketPath} {
			f := filepath.Join(root, p)
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if edit != nil {
			edit(root)
		}
		return root
	}
	if err := checkEgressImage(mk(t, nil)); err != nil {
		t.Errorf("complete image: %v", err)
	}
	for name, edit := range map[string]func(string){
		"no forwarder":   func(r string) { os.Remove(filepath.Join(r, profile.EgressForwarderPath)) },
		"no mount point": func(r string) { os.Remove(filepath.Join(r, profile.EgressSocketPath)) },
		"mount point is a directory": func(r string) {
			p := filepath.Join(r, profile.EgressSocketPath)
			os.Remove(p)
			os.Mkdir(p, 0o755)
		},
		"symlinked directory": func(r string) {
			run := filepath.Join(r, "run")
			os.RemoveAll(run)
			os.Symlink(t.TempDir(), run)
		},
		"symlinked forwarder": func(r string) {
			p := filepath.Join(r, profile.EgressForwarderPath)
			os.Remove(p)
			os.Symlink("/bin/sh", p)
		},
	} {
		if err := checkEgressImage(mk(t, edit)); err == nil || !strings.Contains(err.Error(), "sandbox build") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestEgressRunRefusesOldImage: an egress run on a rootfs without the
// forwarder fails before any container exists, and the unpacked image is
// not written to (runc would create the missing mount point in it).
func TestEgressRunRefusesOldImage(t *testing.T) {
	b, fx := setup(t)
	store := t.TempDir()
	oldImage := "old@sha256:" + strings.Repeat("0a", 32)
	old, err := imagestore.RootfsDir(store, oldImage)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"bin", "tmp", "pack", "proc", "sys", "dev"} {
		if err := os.MkdirAll(filepath.Join(old, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "egress.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	os.Chmod(sock, 0o666)
	id := newID(t, b, "egress-old")
	s := spec(fx, id, "/bin/true")
	s.Image, s.ImageStore, s.EgressSocket = oldImage, store, sock
	resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s})
	if err == nil || !strings.Contains(err.Error(), "sandbox build") {
		t.Fatalf("egress run on an image without the forwarder: %+v, %v", resp, err)
	}
	if _, err := os.Lstat(filepath.Join(old, "run")); !os.IsNotExist(err) {
		t.Errorf("the rootfs was written to: %v", err)
	}
	assertNoLeftovers(t, b, fixture{Rootfs: old, Pack: fx.Pack}, id)
}
