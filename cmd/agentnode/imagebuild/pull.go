package imagebuild

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/kernel/reason"
)

// PullPlatform is the only platform Pull installs.
var PullPlatform = v1.Platform{OS: "linux", Architecture: "amd64"}

// ErrInsecureRegistry is wrapped by Pull's error when the registry would be
// reached over plain HTTP without PullOptions.Insecure.
var ErrInsecureRegistry = errors.New("plain HTTP to a registry is refused without --insecure-registry")

// PullOptions are the inputs of Pull besides the home directory and ref.
type PullOptions struct {
	// Insecure allows plain HTTP to the registry (also needed for localhost
	// and private addresses, which go-containerregistry would otherwise
	// reach over HTTP silently).
	Insecure bool
	// Context bounds the registry requests; nil is context.Background().
	Context context.Context
}

// Pull fetches the image ref from its registry by digest only and installs
// it into the layout of homeDir exactly as Build does (blobs, index entry,
// unpacked rootfs and tree-hash marker), so that image.Resolve then accepts the
// returned Ref. ref is NAME@sha256:<64 hex> or NAME:TAG@sha256:<64 hex>
// (the tag is ignored); a reference without a digest is
// reason.ErrImageUnpinned and nothing is fetched. Access is anonymous.
//
// The manifest must hash to the requested digest. An image index is
// resolved to its linux/amd64 image manifest (fetched by digest too) and
// the returned Ref pins that platform manifest. Every blob is checked
// against its digest and every layer's uncompressed tar against the
// config's diff_ids before anything is written; a failure leaves the
// layout and rootfs directories as they were. The config (sandbox.image)
// is never touched.
func Pull(homeDir, ref string, opts PullOptions) (*image.Image, error) {
	repo, mhex, err := parsePullRef(ref)
	if err != nil {
		return nil, err
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	var nameOpts []name.Option
	if opts.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	dref, err := name.NewDigest(repo+"@sha256:"+mhex, nameOpts...)
	if err != nil {
		return nil, reason.New(reason.ImageUnpinned, "sandbox pull %q: bad reference: %w", ref, err)
	}
	ropts := []remote.Option{
		remote.WithAuth(authn.Anonymous),
		remote.WithContext(ctx),
		remote.WithTransport(&schemeGuard{base: remote.DefaultTransport, insecure: opts.Insecure}),
	}

	rawManifest, mt, err := fetchManifest(dref, mhex, "manifest", ropts)
	if err != nil {
		return nil, err
	}
	if mt == types.OCIImageIndex || mt == types.DockerManifestList {
		pd, err := pickPlatform(rawManifest, mhex)
		if err != nil {
			return nil, err
		}
		mhex = pd.Digest.Hex
		if rawManifest, mt, err = fetchManifest(dref.Context().Digest(pd.Digest.String()), mhex, "linux/amd64 manifest", ropts); err != nil {
			return nil, err
		}
	}
	if !image.IsImageManifest(mt) {
		return nil, fmt.Errorf("pull %s: sha256:%s has media type %q, not an image manifest or index", ref, mhex, mt)
	}
	m, err := v1.ParseManifest(bytes.NewReader(rawManifest))
	if err != nil {
		return nil, reason.New(reason.ImageDigestMismatch, "pull %s: manifest sha256:%s is not an image manifest: %w", ref, mhex, err)
	}
	if m.Config.Digest.Algorithm != "sha256" || len(m.Config.Digest.Hex) != 64 {
		return nil, reason.New(reason.ImageDigestMismatch, "pull %s: manifest names config %q, not a sha256 digest", ref, m.Config.Digest)
	}
	if len(m.Layers) == 0 {
		return nil, fmt.Errorf("pull %s: manifest sha256:%s has no layers", ref, mhex)
	}
	repoRef := dref.Context()

	rawCfg, err := fetchBlob(repoRef, m.Config.Digest, image.MaxMetaBlob, io.Discard, "image config", ropts)
	if err != nil {
		return nil, err
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(rawCfg))
	if err != nil {
		return nil, reason.New(reason.ImageDigestMismatch, "pull %s: image config %s is not an image config: %w", ref, m.Config.Digest, err)
	}
	if cfg.OS != PullPlatform.OS || cfg.Architecture != PullPlatform.Architecture {
		return nil, fmt.Errorf("pull %s: image sha256:%s is for %s/%s, not %s/%s",
			ref, mhex, cfg.OS, cfg.Architecture, PullPlatform.OS, PullPlatform.Architecture)
	}
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		return nil, reason.New(reason.ImageDigestMismatch, "pull %s: image config %s lists %d layers, the manifest %d",
			ref, m.Config.Digest, len(cfg.RootFS.DiffIDs), len(m.Layers))
	}

	// Layers are downloaded into a staging directory beside the layout and
	// verified there; install then copies them in.
	imagesDir := home.ImagesDir(homeDir)
	if err := os.MkdirAll(imagesDir, 0o700); err != nil {
		return nil, fmt.Errorf("create images directory: %w", err)
	}
	staging, err := os.MkdirTemp(imagesDir, ".pull-")
	if err != nil {
		return nil, fmt.Errorf("create pull staging directory: %w", err)
	}
	defer os.RemoveAll(staging)
	layers := make([]stagedLayer, len(m.Layers))
	for i, d := range m.Layers {
		l, err := fetchLayer(repoRef, d, cfg.RootFS.DiffIDs[i], filepath.Join(staging, fmt.Sprintf("layer-%d", i)), ropts)
		if err != nil {
			return nil, fmt.Errorf("pull %s: layer %d: %w", ref, i+1, err)
		}
		layers[i] = *l
	}
	img, err := install(homeDir, repo, rawManifest, rawCfg, cfg, layers)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	return img, nil
}

// parsePullRef accepts NAME@sha256:<hex> and NAME:TAG@sha256:<hex> and
// returns NAME (without the tag) and the digest's hex.
func parsePullRef(ref string) (repo, mhex string, err error) {
	at := strings.Index(ref, "@")
	if at < 0 {
		return "", "", reason.New(reason.ImageUnpinned,
			"sandbox pull %q: images are pulled by digest only, never by tag: want NAME@sha256:<64 hex digits> (NAME:TAG@sha256:… is accepted, the tag is ignored)", ref)
	}
	base := ref[:at]
	if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
		base = base[:i]
	}
	return image.ParseRef(base + ref[at:])
}

// schemeGuard refuses plain HTTP unless insecure: go-containerregistry
// reaches localhost and private addresses over HTTP without being asked.
type schemeGuard struct {
	base     http.RoundTripper
	insecure bool
}

func (g *schemeGuard) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != "https" && !g.insecure {
		return nil, fmt.Errorf("%w: %s", ErrInsecureRegistry, r.URL.Redacted())
	}
	return g.base.RoundTrip(r)
}

// fetchManifest gets the manifest or index ref (by digest) and checks that
// its bytes hash to wantHex.
func fetchManifest(ref name.Digest, wantHex, what string, ropts []remote.Option) ([]byte, types.MediaType, error) {
	desc, err := remote.Get(ref, ropts...)
	if err != nil {
		return nil, "", fmt.Errorf("fetch %s %s: %w", what, ref, err)
	}
	if len(desc.Manifest) > image.MaxMetaBlob {
		return nil, "", reason.New(reason.ImageDigestMismatch, "%s %s is larger than %d bytes", what, ref, image.MaxMetaBlob)
	}
	if err := checkDigest(desc.Manifest, wantHex, what+" "+ref.String()); err != nil {
		return nil, "", err
	}
	return desc.Manifest, desc.MediaType, nil
}

// checkDigest requires data to hash to sha256:wantHex.
func checkDigest(data []byte, wantHex, what string) error {
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != wantHex {
		return reason.New(reason.ImageDigestMismatch, "%s: the registry sent content hashing to sha256:%s, not sha256:%s", what, got, wantHex)
	}
	return nil
}

// pickPlatform returns the linux/amd64 image manifest of the index raw.
func pickPlatform(raw []byte, indexHex string) (*v1.Descriptor, error) {
	idx, err := v1.ParseIndexManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, reason.New(reason.ImageDigestMismatch, "index sha256:%s: %w", indexHex, err)
	}
	var seen []string
	for i := range idx.Manifests {
		d := &idx.Manifests[i]
		if d.Platform == nil {
			continue
		}
		seen = append(seen, d.Platform.String())
		if d.Platform.OS == PullPlatform.OS && d.Platform.Architecture == PullPlatform.Architecture &&
			image.IsImageManifest(d.MediaType) && d.Digest.Algorithm == "sha256" && len(d.Digest.Hex) == 64 {
			return d, nil
		}
	}
	return nil, fmt.Errorf("index sha256:%s has no %s image manifest (platforms: %v)", indexHex, PullPlatform.String(), seen)
}

// fetchBlob reads the blob h of repo (at most limit bytes), copying it to
// w as well, and checks its digest.
func fetchBlob(repo name.Repository, h v1.Hash, limit int64, w io.Writer, what string, ropts []remote.Option) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := copyBlob(repo, h, limit, io.MultiWriter(&buf, w), what, ropts); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// copyBlob streams the blob h of repo into w, refusing more than limit
// bytes or content that does not hash to h.
func copyBlob(repo name.Repository, h v1.Hash, limit int64, w io.Writer, what string, ropts []remote.Option) (int64, error) {
	if h.Algorithm != "sha256" || len(h.Hex) != 64 {
		return 0, reason.New(reason.ImageDigestMismatch, "%s %q is not a sha256 digest", what, h)
	}
	l, err := remote.Layer(repo.Digest(h.String()), ropts...)
	if err != nil {
		return 0, fmt.Errorf("fetch %s %s: %w", what, h, err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return 0, fmt.Errorf("fetch %s %s: %w", what, h, err)
	}
	defer rc.Close()
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, sum), io.LimitReader(rc, limit+1))
	switch got := hex.EncodeToString(sum.Sum(nil)); {
	case n > limit:
		return n, fmt.Errorf("%s %s is larger than %d bytes", what, h, limit)
	case err != nil:
		// go-containerregistry's own digest check fails here too.
		return n, fmt.Errorf("fetch %s %s: %w", what, h, err)
	case got != h.Hex:
		return n, reason.New(reason.ImageDigestMismatch, "%s: the registry sent content hashing to sha256:%s, not %s", what, got, h)
	}
	return n, nil
}

// fetchLayer downloads the layer d into the file p, checks its digest and
// the digest of its uncompressed tar against diffID.
func fetchLayer(repo name.Repository, d v1.Descriptor, diffID v1.Hash, p string, ropts []remote.Option) (*stagedLayer, error) {
	var gz bool
	switch d.MediaType {
	case types.OCILayer, types.DockerLayer:
		gz = true
	case types.OCIUncompressedLayer:
	default:
		return nil, fmt.Errorf("layer %s has media type %q: only gzip or uncompressed tar layers are supported", d.Digest, d.MediaType)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := copyBlob(repo, d.Digest, maxLayerBytes, f, "layer", ropts); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	l := &stagedLayer{
		digest:     d.Digest,
		compressed: func() (io.ReadCloser, error) { return os.Open(p) },
		uncompressed: func() (io.ReadCloser, error) {
			f, err := os.Open(p)
			if err != nil || !gz {
				return f, err
			}
			zr, err := gzip.NewReader(f)
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("layer %s: %w", d.Digest, err)
			}
			return readCloser{zr, f}, nil
		},
	}
	rc, err := l.uncompressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	sum := sha256.New()
	if _, err := io.Copy(sum, io.LimitReader(rc, maxLayerBytes+1<<20)); err != nil {
		return nil, fmt.Errorf("layer %s: decompress: %w", d.Digest, err)
	}
	if got := "sha256:" + hex.EncodeToString(sum.Sum(nil)); got != diffID.String() {
		return nil, reason.New(reason.ImageDigestMismatch,
			"layer %s: uncompressed content hashes to %s, the image config's diff_id is %s", d.Digest, got, diffID)
	}
	return l, nil
}

// readCloser reads from r and closes c.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }
