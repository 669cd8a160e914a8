package imageload

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// fixture writes a two-layer OCI image into a fresh layout and returns the
// layout, the image's reference and the image.
func fixture(t *testing.T) (string, string, v1.Image) {
	t.Helper()
	img, err := random.Image(2048, 2)
	if err != nil {
		t.Fatal(err)
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return dir, "example.org/agentnode/test@" + d.String(), img
}

func TestOpenAndArchive(t *testing.T) {
	dir, ref, want := fixture(t)
	img, err := Open(dir, ref)
	if err != nil {
		t.Fatal(err)
	}
	cd, _ := want.ConfigName()
	if img.ConfigDigest != cd || img.Tag != "example.org/agentnode/test:"+ref[len(ref)-64:][:12] {
		t.Fatalf("Open = config %s tag %s; want config %s", img.ConfigDigest, img.Tag, cd)
	}
	var buf bytes.Buffer
	if err := img.WriteArchive(&buf); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(img.Tag)
	got, err := tarball.Image(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil }, &tag)
	if err != nil {
		t.Fatal(err)
	}
	if gcd, err := got.ConfigName(); err != nil || gcd != cd {
		t.Fatalf("archive config %s, %v; want %s", gcd, err, cd)
	}
}

// Every blob Open reads is checked: a changed manifest, config or layer, or
// a symlink or FIFO in a blob's place, is refused (a FIFO without hanging).
func TestOpenRefusesModifiedLayouts(t *testing.T) {
	for _, what := range []string{"manifest", "config", "layer"} {
		for _, how := range []string{"content", "symlink", "fifo"} {
			t.Run(what+"/"+how, func(t *testing.T) {
				dir, ref, img := fixture(t)
				var h v1.Hash
				switch what {
				case "manifest":
					h, _ = img.Digest()
				case "config":
					h, _ = img.ConfigName()
				default:
					ls, _ := img.Layers()
					h, _ = ls[1].Digest()
				}
				p := filepath.Join(dir, "blobs", "sha256", h.Hex)
				if err := os.Chmod(p, 0o644); err != nil {
					t.Fatal(err)
				}
				switch how {
				case "content":
					data, _ := os.ReadFile(p)
					data[len(data)/2] ^= 1
					if err := os.WriteFile(p, data, 0o644); err != nil {
						t.Fatal(err)
					}
				case "symlink":
					data, _ := os.ReadFile(p)
					other := filepath.Join(t.TempDir(), "blob")
					if err := os.WriteFile(other, data, 0o644); err != nil {
						t.Fatal(err)
					}
					if err := os.Remove(p); err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink(other, p); err != nil {
						t.Fatal(err)
					}
				case "fifo":
					if err := os.Remove(p); err != nil {
						t.Fatal(err)
					}
					if err := syscall.Mkfifo(p, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				_, err := Open(dir, ref)
				if !errors.Is(err, ErrDigestMismatch) {
					t.Fatalf("Open = %v, want ErrDigestMismatch", err)
				}
			})
		}
	}
}

func TestOpenRefusesUnpinned(t *testing.T) {
	dir, ref, _ := fixture(t)
	for _, bad := range []string{"busybox:latest", strings.TrimSuffix(ref, ref[len(ref)-1:]), "@sha256:" + ref[len(ref)-64:]} {
		if _, err := Open(dir, bad); err == nil {
			t.Errorf("Open(%q) accepted", bad)
		}
	}
	// A digest not in the layout.
	missing := ref[:len(ref)-64] + strings.Repeat("1", 64)
	if _, err := Open(dir, missing); err == nil || errors.Is(err, ErrDigestMismatch) {
		t.Errorf("Open(missing) = %v, want a not-found error", err)
	}
}

func TestTag(t *testing.T) {
	hex := strings.Repeat("0a", 32)
	for ref, want := range map[string]string{
		"agentnode/sandbox@sha256:" + hex:                  "agentnode/sandbox:0a0a0a0a0a0a",
		"registry.example:5000/a/b@sha256:" + hex:          "registry.example:5000/a/b:0a0a0a0a0a0a",
		"sha256:" + hex:                                    "",
		"agentnode/sandbox:latest":                         "",
		"agentnode/sandbox@sha256:" + hex[:10]:             "",
		"agentnode/sandbox@sha256:" + hex + "zz":           "",
		"@sha256:" + hex:                                   "",
		"agentnode/sandbox@sha256:" + strings.ToUpper(hex): "",
	} {
		if got := Tag(ref); got != want {
			t.Errorf("Tag(%q) = %q, want %q", ref, got, want)
		}
	}
}
