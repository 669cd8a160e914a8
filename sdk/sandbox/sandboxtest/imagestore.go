package sandboxtest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/agentnode/agentnode/sdk/sandbox/imagestore"
)

// FakeImageStore makes an image store (sdk/sandbox/imagestore) in a
// temporary directory holding one image manifest, which names the config
// digest configID and no layers, and returns the store and the reference
// pinning the manifest: what a backend resolves such a Spec to is
// configID (an image its engine does not have, unless configID is one it
// does). The image has no rootfs.
func FakeImageStore(tb testing.TB, configID string) (store, ref string) {
	tb.Helper()
	manifest := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",` +
		`"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"` + configID + `","size":2},"layers":[]}`)
	sum := sha256.Sum256(manifest)
	h := hex.EncodeToString(sum[:])
	store = tb.TempDir()
	blobs := filepath.Join(imagestore.LayoutDir(store), "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(blobs, h), manifest, 0o644); err != nil {
		tb.Fatal(err)
	}
	return store, "agentnode/fake@sha256:" + h
}

// RandomLayout writes a random one-layer image into a fresh OCI layout for
// a backend's LoadImage test and returns the layout directory, the
// reference pinning the image, its config digest (the engine's image id
// once loaded) and the path of its layer blob (to change a byte of: such a
// layout must load nothing).
func RandomLayout(tb testing.TB) (dir, ref, configID, layerBlob string) {
	tb.Helper()
	img, err := random.Image(512, 1)
	if err != nil {
		tb.Fatal(err)
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	dir = tb.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		tb.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		tb.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		tb.Fatal(err)
	}
	c, err := img.ConfigName()
	if err != nil {
		tb.Fatal(err)
	}
	ls, err := img.Layers()
	if err != nil || len(ls) != 1 {
		tb.Fatalf("random image layers: %d, %v", len(ls), err)
	}
	ld, err := ls[0].Digest()
	if err != nil {
		tb.Fatal(err)
	}
	return dir, "agentnode/loadtest@" + d.String(), c.String(), filepath.Join(dir, "blobs", "sha256", ld.Hex)
}

// FlipByte changes one byte in the middle of the file at path.
func FlipByte(tb testing.TB, path string) {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		tb.Fatalf("reading %s: %d bytes, %v", path, len(data), err)
	}
	data[len(data)/2] ^= 1
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
}
