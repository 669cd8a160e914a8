// Package imageload is what the sandbox backends that run images from
// their engine's own store (Docker, Podman) share to implement
// sandbox.ImageLoader: reading the pinned image from an OCI image layout
// with every blob checked against its digest, and writing it as the
// docker-archive tarball both engines load (`docker load`, `podman load`),
// tagged Tag(ref). After the load the backend asks its engine for the
// image ID of that tag, which must be the config digest: an engine holding
// anything else under the tag is a failed load.
package imageload

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// maxMetaBlob bounds a manifest or config read from the layout.
const maxMetaBlob = 4 << 20

// ErrDigestMismatch is wrapped by Open's errors about a blob that is not
// what its digest says (or not a regular file): the layout was modified.
var ErrDigestMismatch = errors.New("image layout blob does not match its digest")

// Image is an image of an OCI layout whose manifest, config and layer
// blobs were checked against their digests.
type Image struct {
	Ref          string  // name@sha256:<manifest hex>
	Tag          string  // Tag(Ref)
	ConfigDigest v1.Hash // the engines' image ID
	img          v1.Image
	tag          name.Tag
}

// Tag is the tag an image pinned as name@sha256:<hex> is loaded under:
// name:<first 12 hex digits> (a loaded image has no repository digest).
// It is "" for any other form of ref.
func Tag(ref string) string {
	n, h, ok := strings.Cut(ref, "@sha256:")
	if !ok || n == "" || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return ""
	}
	return n + ":" + h[:12]
}

// Open reads the image pinned as ref (name@sha256:<64 hex>) from the OCI
// layout at layoutDir and checks its manifest, config and layer blobs
// against their digests; each blob must be a regular file (a symlink or a
// FIFO in its place is refused, never followed or waited on).
func Open(layoutDir, ref string) (*Image, error) {
	t := Tag(ref)
	if t == "" {
		return nil, fmt.Errorf("image %q is not pinned as name@sha256:<64 hex digits>", ref)
	}
	tag, err := name.NewTag(t, name.WeakValidation)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", ref, err)
	}
	mh := v1.Hash{Algorithm: "sha256", Hex: ref[strings.LastIndex(ref, ":")+1:]}
	raw, err := readBlob(layoutDir, mh, maxMetaBlob)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", mh, err)
	}
	if m.MediaType != types.OCIManifestSchema1 && m.MediaType != types.DockerManifestSchema2 {
		return nil, fmt.Errorf("manifest %s has media type %q, not an image manifest", mh, m.MediaType)
	}
	if _, err := readBlob(layoutDir, m.Config.Digest, maxMetaBlob); err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	for _, l := range m.Layers {
		if _, err := readBlob(layoutDir, l.Digest, -1); err != nil {
			return nil, fmt.Errorf("layer: %w", err)
		}
	}
	img, err := layout.Path(layoutDir).Image(mh)
	if err != nil {
		return nil, fmt.Errorf("image %s in %s: %w", ref, layoutDir, err)
	}
	return &Image{Ref: ref, Tag: t, ConfigDigest: m.Config.Digest, img: img, tag: tag}, nil
}

// WriteArchive writes the image as a docker-archive tarball tagged
// img.Tag.
func (img *Image) WriteArchive(w io.Writer) error {
	if err := tarball.Write(img.tag, img.img, w); err != nil {
		return fmt.Errorf("image archive of %s: %w", img.Ref, err)
	}
	return nil
}

// readBlob checks the blob h of the layout against its digest and returns
// its content when max >= 0 (at most max bytes; larger is an error).
func readBlob(layoutDir string, h v1.Hash, max int64) ([]byte, error) {
	if h.Algorithm != "sha256" || len(h.Hex) != 64 {
		return nil, fmt.Errorf("%s is not a sha256 digest", h)
	}
	p := filepath.Join(layoutDir, "blobs", "sha256", h.Hex)
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%w: %s is a symlink", ErrDigestMismatch, p)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file (%s)", ErrDigestMismatch, p, fi.Mode().Type())
	}
	if max >= 0 && fi.Size() > max {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrDigestMismatch, p, max)
	}
	var buf bytes.Buffer
	var r io.Reader = f
	if max >= 0 {
		r = io.TeeReader(io.LimitReader(f, max+1), &buf)
	}
	got, _, err := v1.SHA256(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if got != h {
		return nil, fmt.Errorf("%w: %s hashes to %s", ErrDigestMismatch, p, got)
	}
	if max >= 0 {
		return buf.Bytes(), nil
	}
	return nil, nil
}
