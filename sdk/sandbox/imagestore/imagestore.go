// Package imagestore is the layout of the host's image store, in which
// the host verifies an image before every sandboxed run (specs/image.md)
// and a sandbox backend resolves that image to what it runs. The host
// passes only the pinned reference (sandbox.Spec.Image) and the store
// (sandbox.Spec.ImageStore); what a backend needs is its own business:
//
//   - a backend that runs a directory (libcontainer) runs RootfsDir, the
//     unpacked root filesystem whose tree hash the host has just checked;
//   - a backend that runs an image of its engine (Docker, Podman) runs the
//     image ID ImageID returns: the config digest named by the manifest,
//     which is read from the store's OCI layout and checked against the
//     reference's digest here, so that the engine runs the verified image
//     and nothing else of that name.
//
// It depends on the standard library only, so that every backend can use
// it without growing.
package imagestore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// MaxManifest bounds a manifest read from the store.
const MaxManifest = 4 << 20

// ErrDigestMismatch is wrapped by ImageID's errors about a manifest that
// does not hash to the reference's digest, or is not a regular file: the
// store was modified after the host checked it.
var ErrDigestMismatch = errors.New("image manifest does not match its digest")

// LayoutDir is the OCI image layout of the store.
func LayoutDir(store string) string { return filepath.Join(store, "oci") }

// RootfsBase is the directory of the store's unpacked root filesystems.
func RootfsBase(store string) string { return filepath.Join(store, "rootfs") }

// ManifestHex returns the 64 lowercase hex digits of the manifest digest
// of ref, name@sha256:<64 hex>; any other form, and the all-zero
// placeholder, is an error.
func ManifestHex(ref string) (string, error) {
	n, h, ok := strings.Cut(ref, "@sha256:")
	if !ok || n == "" || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" || strings.Trim(h, "0") == "" {
		return "", fmt.Errorf("image %q is not pinned as name@sha256:<64 hex digits>", ref)
	}
	return h, nil
}

// checkStore refuses a store that is not an absolute path.
func checkStore(store string) error {
	if store == "" || !filepath.IsAbs(store) {
		return fmt.Errorf("image store %q is not an absolute path", store)
	}
	return nil
}

// RootfsDir is where the store holds the unpacked root filesystem of ref.
func RootfsDir(store, ref string) (string, error) {
	if err := checkStore(store); err != nil {
		return "", err
	}
	h, err := ManifestHex(ref)
	if err != nil {
		return "", err
	}
	return filepath.Join(RootfsBase(filepath.Clean(store)), h), nil
}

// ImageID reads the manifest of ref from the store's OCI layout, checks
// that it hashes to ref's digest (a regular file of at most MaxManifest
// bytes: a symlink or FIFO in its place is refused, never followed or
// waited on) and returns the config digest it names, sha256:<64 hex>:
// the image ID Docker and Podman give the image.
func ImageID(store, ref string) (string, error) {
	if err := checkStore(store); err != nil {
		return "", err
	}
	h, err := ManifestHex(ref)
	if err != nil {
		return "", err
	}
	p := filepath.Join(LayoutDir(store), "blobs", "sha256", h)
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, syscall.ELOOP) {
		return "", fmt.Errorf("%w: %s is a symlink", ErrDigestMismatch, p)
	}
	if err != nil {
		return "", fmt.Errorf("manifest of %s: %w", ref, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is not a regular file", ErrDigestMismatch, p)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxManifest+1))
	if err != nil {
		return "", fmt.Errorf("manifest of %s: %w", ref, err)
	}
	if len(data) > MaxManifest {
		return "", fmt.Errorf("%w: %s is larger than %d bytes", ErrDigestMismatch, p, MaxManifest)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != h {
		return "", fmt.Errorf("%w: %s hashes to sha256:%s", ErrDigestMismatch, p, got)
	}
	var m struct {
		Config struct {
			Digest string `json:"digest"`
		} `json:"config"`
	}
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&m); err != nil {
		return "", fmt.Errorf("manifest of %s: %w", ref, err)
	}
	id := m.Config.Digest
	if c, ok := strings.CutPrefix(id, "sha256:"); !ok || len(c) != 64 || strings.Trim(c, "0123456789abcdef") != "" {
		return "", fmt.Errorf("manifest of %s names config %q, not sha256:<64 hex digits>", ref, id)
	}
	return id, nil
}
