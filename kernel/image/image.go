// Package image verifies agentnode's sandbox images before every sandboxed
// run: it belongs in the trusted core because the decision to run
// community code in a sandbox rests on running exactly the pinned image.
//
// Images live in the image store home.ImagesDir(home), laid out as
// sdk/sandbox/imagestore says: an OCI image layout under oci/, each image
// also unpacked, read-only, under rootfs/<manifest hex>/ with a tree hash
// recorded beside it. Building, pulling and unpacking them is a front
// end's work (cmd/agentnode/imagebuild, which this package does not
// import); loading them into Docker or Podman is the backend plugins'
// (sandbox.ImageLoader). A sandbox backend gets the verified reference
// and the store (sandbox.Spec.Image, ImageStore) and resolves the image
// there itself.
//
// Images are always addressed by digest (name@sha256:<manifest>). Resolve is
// the check made before every sandboxed run: it refuses an unpinned or
// placeholder reference (reason.ErrImageUnpinned), a missing image
// (reason.ErrSandboxUnavailable, "image_missing") and any blob or rootfs that
// does not match its digest (reason.ErrImageDigestMismatch). Nothing is ever
// pulled implicitly. specs/image.md describes the image and the layout.
package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/sandbox/imagestore"
	"github.com/agentnode/agentnode/sdk/treewatch"
)

// DefaultName is the repository name of the default image (`agentnode
// sandbox build`), assumed for an index entry without a name.
const DefaultName = "agentnode/sandbox"

// RefNameAnnotation is the index.json annotation that names an image in the
// OCI layout (name:<short digest>).
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// ImageMissing is the word in the message of a refusal because the image is
// not on this machine (the sandbox SDK's availability reason of that name).
const ImageMissing = "image_missing"

// MaxMetaBlob bounds a manifest, config or index read from the layout.
const MaxMetaBlob = 4 << 20

// Image is an image in the local store.
type Image struct {
	Ref            string `json:"ref"`             // name@sha256:<manifest hex>
	Name           string `json:"name"`            // repository name, e.g. agentnode/sandbox
	ManifestDigest string `json:"manifest_digest"` // sha256:...
	ConfigDigest   string `json:"config_digest"`   // sha256:..., the image ID of docker/podman
	Rootfs         string `json:"rootfs"`          // unpacked root filesystem (libcontainer)
	Layout         string `json:"layout"`          // OCI image layout path
	// Store is the image store holding Layout and Rootfs
	// (sdk/sandbox/imagestore): what a sandbox backend gets with Ref
	// (sandbox.Spec.ImageStore) to resolve the image itself.
	Store string `json:"store"`
}

// Tag is the tag the image gets in the OCI layout and in Docker/Podman:
// name:<first 12 hex digits of the manifest digest>.
func (img *Image) Tag() string {
	return img.Name + ":" + shortHex(img.ManifestDigest)
}

func shortHex(digest string) string {
	h := strings.TrimPrefix(digest, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}

// LayoutDir is the OCI image layout of homeDir's image store
// (home.ImagesDir; its layout is sdk/sandbox/imagestore's, which the
// sandbox backends resolve images in).
func LayoutDir(homeDir string) string { return imagestore.LayoutDir(home.ImagesDir(homeDir)) }

// RootfsBase is the directory holding the unpacked root filesystems.
func RootfsBase(homeDir string) string { return imagestore.RootfsBase(home.ImagesDir(homeDir)) }

// RootfsDir is where the image with manifest digest hex is unpacked.
func RootfsDir(homeDir, manifestHex string) string {
	return filepath.Join(RootfsBase(homeDir), manifestHex)
}

// MarkerPath is the tree-hash marker beside a rootfs.
func MarkerPath(homeDir, manifestHex string) string {
	return filepath.Join(RootfsBase(homeDir), manifestHex+".treehash")
}

// BlobPath is the blob hexDigest of the OCI layout at layoutDir.
func BlobPath(layoutDir, hexDigest string) string {
	return filepath.Join(layoutDir, "blobs", "sha256", hexDigest)
}

// refPattern is sandbox.image's pattern in specs/schema/config.schema.json
// (lower case only), narrowed to the distribution reference grammar: an
// optional registry host[:port]/, then path components separated by single
// slashes, then @sha256: and 64 hex digits.
var refPattern = regexp.MustCompile(`^(` +
	`(?:` + hostPart + `(?:\.` + hostPart + `)*(?::[0-9]+)?/)?` +
	pathPart + `(?:/` + pathPart + `)*` +
	`)@sha256:([0-9a-f]{64})$`)

const (
	hostPart = `(?:[a-z0-9]|[a-z0-9][a-z0-9-]*[a-z0-9])`
	pathPart = `[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*`
)

var zeroHex = strings.Repeat("0", 64)

// ParseRef splits a pinned reference name@sha256:<64 hex> into the
// repository name and the 64 hex digits of the manifest digest. Anything
// else, and the all-zero placeholder digest, is reason.ErrImageUnpinned.
func ParseRef(ref string) (repo, manifestHex string, err error) {
	m := refPattern.FindStringSubmatch(ref)
	if m == nil {
		return "", "", reason.New(reason.ImageUnpinned,
			"sandbox image %q is not pinned: want name@sha256:<64 hex digits> (tags are never used)", ref)
	}
	if _, err := name.NewRepository(m[1], name.WeakValidation); err != nil {
		return "", "", reason.New(reason.ImageUnpinned, "sandbox image %q is not pinned: bad name: %w", ref, err)
	}
	if m[2] == zeroHex {
		return "", "", reason.New(reason.ImageUnpinned,
			"sandbox image %q is the placeholder: run `agentnode sandbox build` to build the image and pin its digest", ref)
	}
	return m[1], m[2], nil
}

// Resolve is the check made before every sandboxed run, and the one
// `agentnode doctor` makes. ref must be name@sha256:<64 hex> and not the
// placeholder (else ErrImageUnpinned); the layout's index.json must be an
// image index that lists the manifest (else ErrImageDigestMismatch; a
// missing index is ErrSandboxUnavailable, "image_missing"), the manifest
// and config blobs must be in the layout (else ErrSandboxUnavailable,
// "image_missing") and hash to their digests, and the unpacked rootfs must
// exist and hash to the tree hash recorded when it was unpacked (else
// ErrImageDigestMismatch).
func Resolve(homeDir, ref string) (*Image, error) { return ResolveSealed(homeDir, ref, nil) }

// ResolveSealed is Resolve re-hashing the rootfs only when seals has not
// watched it unchanged since it last verified (sdk/treewatch; nil: always).
func ResolveSealed(homeDir, ref string, seals *treewatch.Seals) (*Image, error) {
	repo, mhex, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	img := &Image{
		Ref:            ref,
		Name:           repo,
		ManifestDigest: "sha256:" + mhex,
		Layout:         LayoutDir(homeDir),
		Rootfs:         RootfsDir(homeDir, mhex),
		Store:          home.ImagesDir(homeDir),
	}
	m, err := ReadManifest(img.Layout, mhex)
	if err != nil {
		return nil, err
	}
	if err := checkIndexed(img.Layout, mhex); err != nil {
		return nil, err
	}
	img.ConfigDigest = m.Config.Digest.String()
	cfg, err := readConfig(img.Layout, m)
	if err != nil {
		return nil, err
	}
	if err := verifyRootfs(homeDir, mhex, cfg, seals); err != nil {
		return nil, err
	}
	return img, nil
}

// checkIndexed checks that the layout's index.json parses as an OCI image
// index and lists the image manifest sha256:mhex. The index is not
// content-addressed, so it cannot be hashed: it must parse and name the
// pinned image, or the layout was damaged or edited (Status, a rebuild and
// the load into Docker or Podman all read it).
func checkIndexed(layoutDir, mhex string) error {
	idx, err := ReadIndex(layoutDir)
	if errors.Is(err, fs.ErrNotExist) {
		return reason.New(reason.SandboxUnavailable, "%s: %w; run `agentnode sandbox build`", ImageMissing, err)
	}
	if err != nil {
		return reason.New(reason.ImageDigestMismatch,
			"%w: the image layout was modified; rebuild with `agentnode sandbox build`", err)
	}
	for _, d := range idx.Manifests {
		if d.Digest.Algorithm == "sha256" && d.Digest.Hex == mhex && IsImageManifest(d.MediaType) {
			return nil
		}
	}
	return reason.New(reason.ImageDigestMismatch,
		"image index %s does not list the image manifest sha256:%s: the image layout was modified; rebuild with `agentnode sandbox build`",
		filepath.Join(layoutDir, "index.json"), mhex)
}

// readVerified reads the blob hexDigest from the layout and checks that it
// hashes to its name. what names the blob in errors. The blob is a regular
// file of at most MaxMetaBlob bytes (bounded.ReadFile): a symlink, FIFO or
// device in its place means the layout was modified, and never hangs.
func readVerified(layoutDir, hexDigest, what string) ([]byte, error) {
	p := BlobPath(layoutDir, hexDigest)
	data, err := bounded.ReadFile(p, MaxMetaBlob)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, reason.New(reason.SandboxUnavailable,
			"%s: %s sha256:%s is not in the image layout %s; run `agentnode sandbox build`",
			ImageMissing, what, hexDigest, layoutDir)
	case errors.Is(err, bounded.ErrTooLarge):
		return nil, reason.New(reason.ImageDigestMismatch, "%s sha256:%s in %s is larger than %d bytes", what, hexDigest, layoutDir, MaxMetaBlob)
	case errors.Is(err, bounded.ErrNotRegular):
		return nil, reason.New(reason.ImageDigestMismatch,
			"%s blob: %w: the image layout was modified; rebuild with `agentnode sandbox build`", what, err)
	case err != nil:
		return nil, reason.New(reason.SandboxUnavailable, "%s: read %s: %w", ImageMissing, what, err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != hexDigest {
		return nil, reason.New(reason.ImageDigestMismatch,
			"%s blob %s hashes to sha256:%s, not sha256:%s: the image layout was modified; rebuild with `agentnode sandbox build`",
			what, p, got, hexDigest)
	}
	return data, nil
}

// ReadManifest reads the image manifest blob sha256:mhex of the layout,
// verified against its digest (sandbox status lists images with it,
// cmd/agentnode/imagebuild).
func ReadManifest(layoutDir, mhex string) (*v1.Manifest, error) {
	data, err := readVerified(layoutDir, mhex, "manifest")
	if err != nil {
		return nil, err
	}
	m, err := v1.ParseManifest(bytes.NewReader(data))
	if err != nil {
		return nil, reason.New(reason.ImageDigestMismatch, "manifest sha256:%s is not an image manifest: %w", mhex, err)
	}
	switch m.MediaType {
	case types.OCIManifestSchema1, types.DockerManifestSchema2:
	default:
		return nil, reason.New(reason.ImageDigestMismatch, "manifest sha256:%s has media type %q, not an image manifest", mhex, m.MediaType)
	}
	if m.Config.Digest.Algorithm != "sha256" || len(m.Config.Digest.Hex) != 64 {
		return nil, reason.New(reason.ImageDigestMismatch, "manifest sha256:%s names config %q, not a sha256 digest", mhex, m.Config.Digest)
	}
	return m, nil
}

func readConfig(layoutDir string, m *v1.Manifest) (*v1.ConfigFile, error) {
	data, err := readVerified(layoutDir, m.Config.Digest.Hex, "image config")
	if err != nil {
		return nil, err
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(data))
	if err != nil {
		return nil, reason.New(reason.ImageDigestMismatch, "image config %s is not an image config: %w", m.Config.Digest, err)
	}
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		return nil, reason.New(reason.ImageDigestMismatch, "image config %s lists %d layers, the manifest %d",
			m.Config.Digest, len(cfg.RootFS.DiffIDs), len(m.Layers))
	}
	return cfg, nil
}

// IsImageManifest reports whether mt is an OCI or Docker image manifest.
func IsImageManifest(mt types.MediaType) bool {
	return mt == types.OCIManifestSchema1 || mt == types.DockerManifestSchema2
}

// ErrCorruptIndex: index.json is not JSON of an image index.
var ErrCorruptIndex = errors.New("not an image index")

// ReadIndex reads index.json of the layout. A missing layout wraps
// fs.ErrNotExist.
//
// It is a regular file of at most MaxMetaBlob bytes (bounded.ReadFile): a
// symlink, FIFO or device in its place is an error, never a hang.
func ReadIndex(layoutDir string) (*v1.IndexManifest, error) {
	p := filepath.Join(layoutDir, "index.json")
	data, err := bounded.ReadFile(p, MaxMetaBlob)
	if err != nil {
		return nil, fmt.Errorf("read image index: %w", err)
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("image index %s: %w: %w", p, ErrCorruptIndex, err)
	}
	return &idx, nil
}
