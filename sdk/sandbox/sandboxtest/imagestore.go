package sandboxtest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

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
