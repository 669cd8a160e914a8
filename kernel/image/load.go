package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/reason"
)

// Engines are the container engines Load knows.
var Engines = []string{"docker", "podman"}

// ErrEngineNotInstalled is returned when the engine's CLI is not on PATH.
var ErrEngineNotInstalled = errors.New("container engine CLI not installed")

// Time limits of the engine CLI calls.
const (
	loadTimeout    = 5 * time.Minute
	inspectTimeout = 30 * time.Second
	maxCLIOutput   = 64 << 10
)

// EngineCLI returns the absolute path of the engine's CLI ("docker" or
// "podman"), or an error wrapping ErrEngineNotInstalled.
func EngineCLI(engine string) (string, error) {
	switch engine {
	case "docker", "podman":
	default:
		return "", fmt.Errorf("unknown container engine %q: want docker or podman", engine)
	}
	p, err := exec.LookPath(engine)
	if err != nil {
		return "", fmt.Errorf("%s: %w: %w", engine, ErrEngineNotInstalled, err)
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%s: %w: found only at the relative path %s", engine, ErrEngineNotInstalled, p)
	}
	return p, nil
}

// Load loads img into the engine ("docker" or "podman"): its blobs are
// verified against their digests, written as a docker-archive tarball tagged
// img.Tag() and piped to `<engine> load`; then the engine must report the
// image ID img.ConfigDigest for that tag.
func Load(img *Image, engine string) error {
	bin, err := EngineCLI(engine)
	if err != nil {
		return err
	}
	vimg, err := verifiedImage(img)
	if err != nil {
		return fmt.Errorf("load into %s: %w", engine, err)
	}
	tag, err := name.NewTag(img.Tag(), name.WeakValidation)
	if err != nil {
		return fmt.Errorf("load into %s: tag %q: %w", engine, img.Tag(), err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	pr, pw := io.Pipe()
	writeErr := make(chan error, 1)
	go func() {
		err := tarball.Write(tag, vimg, pw)
		pw.CloseWithError(err)
		writeErr <- err
	}()
	var stdout, stderr limitedBuffer
	cmd := exec.CommandContext(ctx, bin, "load")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pr, &stdout, &stderr
	runErr := cmd.Run()
	pr.CloseWithError(errors.New("engine exited"))
	werr := <-writeErr
	if runErr != nil {
		return fmt.Errorf("%s load failed: %w: %s", engine, runErr, stderr.text())
	}
	if werr != nil {
		return fmt.Errorf("write image archive for %s: %w", engine, werr)
	}
	id, err := inspectID(bin, img.Tag())
	if err != nil {
		return fmt.Errorf("%s load: the image is not there afterwards: %w", engine, err)
	}
	if id != img.ConfigDigest {
		return fmt.Errorf("%s reports image ID %s for %s, want %s (the config digest)", engine, id, img.Tag(), img.ConfigDigest)
	}
	return nil
}

// Present reports whether the engine has an image whose ID is
// img.ConfigDigest. The error wraps ErrEngineNotInstalled when the CLI is
// missing, and says why otherwise (for example the daemon is not running).
func Present(img *Image, engine string) (bool, error) {
	bin, err := EngineCLI(engine)
	if err != nil {
		return false, err
	}
	id, err := inspectID(bin, strings.TrimPrefix(img.ConfigDigest, "sha256:"))
	if errors.Is(err, errNoSuchImage) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return id == img.ConfigDigest, nil
}

var errNoSuchImage = errors.New("no such image")

var noSuchImage = regexp.MustCompile(`(?i)no such image|image not known|not found`)

// inspectID asks the engine for the image ID of ref, as sha256:<hex>.
func inspectID(bin, ref string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	defer cancel()
	var stdout, stderr limitedBuffer
	cmd := exec.CommandContext(ctx, bin, "image", "inspect", "--format", "{{.Id}}", ref)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := stderr.text()
		if noSuchImage.MatchString(msg) {
			return "", fmt.Errorf("%w: %s", errNoSuchImage, msg)
		}
		return "", fmt.Errorf("%s image inspect %s: %w: %s", filepath.Base(bin), ref, err, msg)
	}
	id := strings.TrimSpace(stdout.text())
	if !strings.HasPrefix(id, "sha256:") {
		id = "sha256:" + id // podman prints the bare hex
	}
	return id, nil
}

// verifiedImage checks the manifest, config and layer blobs of img against
// their digests and returns the image from the layout.
func verifiedImage(img *Image) (v1.Image, error) {
	h, err := v1.NewHash(img.ManifestDigest)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", img.Ref, err)
	}
	m, err := readManifest(img.Layout, h.Hex)
	if err != nil {
		return nil, err
	}
	if _, err := readConfig(img.Layout, m); err != nil {
		return nil, err
	}
	for _, l := range m.Layers {
		if err := verifyBlobFile(img.Layout, l.Digest); err != nil {
			return nil, err
		}
	}
	return layout.Path(img.Layout).Image(h)
}

func verifyBlobFile(layoutDir string, d v1.Hash) error {
	if d.Algorithm != "sha256" {
		return fmt.Errorf("layer %s: not a sha256 digest", d)
	}
	// layout.Path.Blob would open a FIFO put in its place and wait for
	// a writer: only a regular file is read.
	f, err := bounded.Open(blobPath(layoutDir, d.Hex), os.O_RDONLY, 0)
	if errors.Is(err, bounded.ErrNotRegular) {
		return reason.New(reason.ImageDigestMismatch, "layer blob %s: %w: the image layout was modified", d, err)
	}
	if err != nil {
		return fmt.Errorf("layer %s: %w", d, err)
	}
	defer f.Close()
	got, _, err := v1.SHA256(f)
	if err != nil {
		return fmt.Errorf("layer %s: %w", d, err)
	}
	if got != d {
		return reason.New(reason.ImageDigestMismatch, "layer blob %s hashes to %s: the image layout was modified", d, got)
	}
	return nil
}

// limitedBuffer keeps the first maxCLIOutput bytes written to it.
type limitedBuffer struct{ b bytes.Buffer }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxCLIOutput - l.b.Len(); room > 0 {
		if len(p) > room {
			l.b.Write(p[:room])
		} else {
			l.b.Write(p)
		}
	}
	return len(p), nil
}

func (l *limitedBuffer) text() string { return strings.TrimSpace(l.b.String()) }
