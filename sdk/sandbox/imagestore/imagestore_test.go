package imagestore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// store writes manifest into a fresh store's layout and returns the store
// and the reference pinning it.
func store(t *testing.T, manifest string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	sum := sha256.Sum256([]byte(manifest))
	h := hex.EncodeToString(sum[:])
	blobs := filepath.Join(LayoutDir(dir), "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(blobs, h), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, "agentnode/sandbox@sha256:" + h
}

var configID = "sha256:" + strings.Repeat("c1", 32)

func manifestNaming(id string) string {
	return `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"` + id + `","size":1},"layers":[]}`
}

func TestImageID(t *testing.T) {
	dir, ref := store(t, manifestNaming(configID))
	if id, err := ImageID(dir, ref); err != nil || id != configID {
		t.Fatalf("ImageID = %q, %v; want %s", id, err, configID)
	}
	// The host's store, named by a relative path, is refused.
	if _, err := ImageID("rel/store", ref); err == nil {
		t.Error("relative store accepted")
	}
	// A reference whose manifest is not in the store.
	if _, err := ImageID(dir, "agentnode/sandbox@sha256:"+strings.Repeat("e", 64)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing manifest: %v", err)
	}
	// A manifest naming something other than a sha256 config digest.
	for _, bad := range []string{"busybox:latest", "sha256:" + strings.Repeat("C1", 32), "", "sha256:../x"} {
		d, r := store(t, manifestNaming(bad))
		if id, err := ImageID(d, r); err == nil {
			t.Errorf("config %q: ImageID = %q", bad, id)
		}
	}
}

// What the host verified is what the backend runs: a manifest changed,
// replaced by a symlink or a FIFO after the check is refused (a FIFO
// without hanging).
func TestImageIDRefusesAModifiedStore(t *testing.T) {
	for _, how := range []string{"content", "symlink", "fifo"} {
		t.Run(how, func(t *testing.T) {
			dir, ref := store(t, manifestNaming(configID))
			h, _ := ManifestHex(ref)
			p := filepath.Join(LayoutDir(dir), "blobs", "sha256", h)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			switch how {
			case "content":
				// Another image's manifest under the verified digest.
				err := os.WriteFile(p, []byte(manifestNaming("sha256:"+strings.Repeat("66", 32))), 0o644)
				if err != nil {
					t.Fatal(err)
				}
			case "symlink":
				other := filepath.Join(t.TempDir(), "m")
				if err := os.WriteFile(other, []byte(manifestNaming(configID)), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(other, p); err != nil {
					t.Fatal(err)
				}
			case "fifo":
				if err := syscall.Mkfifo(p, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if id, err := ImageID(dir, ref); !errors.Is(err, ErrDigestMismatch) {
				t.Fatalf("ImageID = %q, %v; want ErrDigestMismatch", id, err)
			}
		})
	}
}

func TestRootfsDir(t *testing.T) {
	h := strings.Repeat("ab", 32)
	got, err := RootfsDir("/var/lib/agentnode/images/", "localhost:5000/a/b@sha256:"+h)
	if err != nil || got != "/var/lib/agentnode/images/rootfs/"+h {
		t.Fatalf("RootfsDir = %q, %v", got, err)
	}
	for _, c := range []struct{ store, ref string }{
		{"", "a@sha256:" + h},
		{"images", "a@sha256:" + h},
		{"/s", "a:latest"},
		{"/s", "a@sha256:" + strings.ToUpper(h)},
		{"/s", "a@sha256:" + h[:63]},
		{"/s", "a@sha256:" + strings.Repeat("0", 64)},
		{"/s", "@sha256:" + h},
		{"/s", "a@sha256:../../" + h[:58]},
	} {
		if p, err := RootfsDir(c.store, c.ref); err == nil {
			t.Errorf("RootfsDir(%q, %q) = %q, want an error", c.store, c.ref, p)
		}
	}
}
