package imagebuild

import (
	"bytes"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/kernel/reason"
)

// testRegistry is an in-memory registry on a local HTTP server. tamper,
// when set, rewrites manifest response bodies; requests counts requests.
type testRegistry struct {
	host     string
	tamper   atomic.Bool
	requests atomic.Int64
}

func newTestRegistry(t *testing.T) *testRegistry {
	t.Helper()
	r := &testRegistry{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		if !r.tamper.Load() || req.Method != http.MethodGet || !strings.Contains(req.URL.Path, "/manifests/") {
			h.ServeHTTP(w, req)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body := bytes.Replace(rec.Body.Bytes(), []byte(`"schemaVersion":2`), []byte(`"schemaVersion":2 `), 1)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// builtImage builds the default image into a fresh home and returns it with
// its go-containerregistry form read back from the OCI layout.
func builtImage(t *testing.T) (*image.Image, v1.Image) {
	t.Helper()
	img := build(t, t.TempDir(), hostBusybox(t))
	p, err := layout.FromPath(img.Layout)
	if err != nil {
		t.Fatal(err)
	}
	h, err := v1.NewHash(img.ManifestDigest)
	if err != nil {
		t.Fatal(err)
	}
	vi, err := p.Image(h)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := vi.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS+"/"+cfg.Architecture != "linux/amd64" {
		t.Skipf("the host busybox gives a %s/%s image; Pull installs linux/amd64 only", cfg.OS, cfg.Architecture)
	}
	return img, vi
}

func push(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	d, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(d, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

// assertNothingWritten fails if the home has an image layout or rootfs.
func assertNothingWritten(t *testing.T, h string) {
	t.Helper()
	for _, d := range []string{image.LayoutDir(h), image.RootfsBase(h)} {
		if _, err := os.Lstat(d); !errors.Is(err, os.ErrNotExist) {
			entries, _ := os.ReadDir(d)
			t.Errorf("a failed pull left %s (%v)", d, entries)
		}
	}
}

func TestPull(t *testing.T) {
	built, vi := builtImage(t)
	reg := newTestRegistry(t)
	repo := reg.host + "/agentnode/sandbox"
	ref := repo + "@" + built.ManifestDigest
	push(t, ref, vi)

	h := t.TempDir()
	got, err := Pull(h, ref, PullOptions{Insecure: true})
	if err != nil {
		t.Fatalf("Pull: %v", err)
	}
	if got.Ref != ref || got.ManifestDigest != built.ManifestDigest || got.ConfigDigest != built.ConfigDigest || got.Name != repo {
		t.Errorf("Pull = %+v, built %+v", got, built)
	}
	r, err := image.Resolve(h, ref)
	if err != nil {
		t.Fatalf("Resolve after Pull: %v", err)
	}
	if r.ConfigDigest != built.ConfigDigest || r.Rootfs != image.RootfsDir(h, strings.TrimPrefix(built.ManifestDigest, "sha256:")) {
		t.Errorf("Resolve = %+v", r)
	}
	// The pulled rootfs is the built one, byte for byte.
	mhex := strings.TrimPrefix(built.ManifestDigest, "sha256:")
	a, err1 := image.TreeHash(built.Rootfs, nil)
	b, err2 := image.TreeHash(r.Rootfs, nil)
	if err1 != nil || err2 != nil || a != b {
		t.Errorf("tree hashes differ: %s %v / %s %v", a, err1, b, err2)
	}
	if _, err := os.Stat(image.MarkerPath(h, mhex)); err != nil {
		t.Errorf("marker: %v", err)
	}
	imgs, err := Status(h)
	if err != nil || len(imgs) != 1 || imgs[0].Ref != ref {
		t.Errorf("Status = %+v, %v", imgs, err)
	}
	// No staging left behind.
	entries, _ := os.ReadDir(image.RootfsBase(h))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left over: %s", e.Name())
		}
	}
	if m, _ := os.ReadDir(image.LayoutDir(h) + "/.."); len(m) == 0 {
		t.Error("images directory is empty")
	} else {
		for _, e := range m {
			if strings.HasPrefix(e.Name(), ".pull-") {
				t.Errorf("left over: %s", e.Name())
			}
		}
	}

	// name:tag@digest uses only the digest; pulling again is a no-op.
	again, err := Pull(h, repo+":latest@"+built.ManifestDigest, PullOptions{Insecure: true})
	if err != nil || again.Ref != ref {
		t.Fatalf("Pull with tag and digest = %+v, %v", again, err)
	}
	if imgs, _ := Status(h); len(imgs) != 1 {
		t.Errorf("pulling twice lists %d images", len(imgs))
	}
}

func TestPullIndexPicksLinuxAmd64(t *testing.T) {
	built, vi := builtImage(t)
	reg := newTestRegistry(t)
	repo := reg.host + "/agentnode/sandbox"
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: vi, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: vi, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
	)
	idxDigest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	d, err := name.NewDigest(repo+"@"+idxDigest.String(), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(d, idx); err != nil {
		t.Fatal(err)
	}
	h := t.TempDir()
	got, err := Pull(h, d.String(), PullOptions{Insecure: true})
	if err != nil {
		t.Fatalf("Pull index: %v", err)
	}
	if got.ManifestDigest != built.ManifestDigest || got.Ref != repo+"@"+built.ManifestDigest {
		t.Errorf("Pull index = %+v, want the platform manifest %s", got, built.ManifestDigest)
	}
	if _, err := image.Resolve(h, got.Ref); err != nil {
		t.Errorf("Resolve: %v", err)
	}

	// An index without linux/amd64 is refused.
	only := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: vi, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}})
	od, _ := only.Digest()
	d2, _ := name.NewDigest(repo+"@"+od.String(), name.Insecure)
	if err := remote.WriteIndex(d2, only); err != nil {
		t.Fatal(err)
	}
	h2 := t.TempDir()
	if _, err := Pull(h2, d2.String(), PullOptions{Insecure: true}); err == nil || !strings.Contains(err.Error(), "linux/amd64") {
		t.Errorf("Pull of an arm64-only index = %v", err)
	}
	assertNothingWritten(t, h2)
}

func TestPullRefusals(t *testing.T) {
	built, vi := builtImage(t)
	reg := newTestRegistry(t)
	repo := reg.host + "/agentnode/sandbox"
	ref := repo + "@" + built.ManifestDigest
	push(t, ref, vi)
	push(t, repo+":latest", vi) // a tag exists, and is still never used

	t.Run("tag only", func(t *testing.T) {
		h := t.TempDir()
		before := reg.requests.Load()
		for _, r := range []string{repo + ":latest", repo, repo + "@sha256:" + strings.Repeat("0", 64), repo + "@sha256:ABC"} {
			_, err := Pull(h, r, PullOptions{Insecure: true})
			if !errors.Is(err, reason.ErrImageUnpinned) {
				t.Errorf("Pull(%q) = %v, want image_unpinned", r, err)
			}
		}
		_, err := Pull(h, repo+":latest", PullOptions{Insecure: true})
		if err == nil || !strings.Contains(err.Error(), "by digest only") {
			t.Errorf("message = %v", err)
		}
		if n := reg.requests.Load() - before; n != 0 {
			t.Errorf("a refused reference made %d registry requests", n)
		}
		assertNothingWritten(t, h)
	})

	t.Run("digest not in registry", func(t *testing.T) {
		h := t.TempDir()
		missing := repo + "@sha256:" + strings.Repeat("ab", 32)
		_, err := Pull(h, missing, PullOptions{Insecure: true})
		if err == nil || !strings.Contains(err.Error(), "fetch manifest") {
			t.Fatalf("Pull(%s) = %v", missing, err)
		}
		assertNothingWritten(t, h)
		if _, err := image.Resolve(h, missing); !errors.Is(err, reason.ErrSandboxUnavailable) {
			t.Errorf("Resolve after failed pull = %v", err)
		}
	})

	t.Run("tampered manifest", func(t *testing.T) {
		h := t.TempDir()
		reg.tamper.Store(true)
		defer reg.tamper.Store(false)
		_, err := Pull(h, ref, PullOptions{Insecure: true})
		if err == nil {
			t.Fatal("Pull accepted a tampered manifest")
		}
		if !strings.Contains(err.Error(), "does not match") && !errors.Is(err, reason.ErrImageDigestMismatch) {
			t.Errorf("tampered manifest refused for another reason: %v", err)
		}
		assertNothingWritten(t, h)
	})

	t.Run("plain HTTP without Insecure", func(t *testing.T) {
		h := t.TempDir()
		_, err := Pull(h, ref, PullOptions{})
		if err == nil || !strings.Contains(err.Error(), "--insecure-registry") {
			t.Fatalf("Pull over plain HTTP without Insecure = %v", err)
		}
		assertNothingWritten(t, h)
	})
}

func TestCheckDigest(t *testing.T) {
	data := []byte(`{"schemaVersion":2}`)
	good := sha256Hash(data).Hex
	if err := checkDigest(data, good, "manifest"); err != nil {
		t.Errorf("checkDigest(good) = %v", err)
	}
	err := checkDigest(append(data, ' '), good, "manifest")
	if !errors.Is(err, reason.ErrImageDigestMismatch) {
		t.Errorf("checkDigest(tampered) = %v", err)
	}
}

func TestSchemeGuard(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	if _, err := (&schemeGuard{base: http.DefaultTransport}).RoundTrip(req); !errors.Is(err, ErrInsecureRegistry) {
		t.Errorf("plain HTTP without insecure = %v", err)
	}
	resp, err := (&schemeGuard{base: http.DefaultTransport, insecure: true}).RoundTrip(req)
	if err != nil {
		t.Fatalf("plain HTTP with insecure = %v", err)
	}
	resp.Body.Close()
}
