package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/imageload"
)

// TestLoadImage: the image `agentnode sandbox build` made loads (again:
// loading twice is fine) under its config digest; an image podman does
// not have is absent; a layout whose layer was changed loads nothing.
func TestLoadImage(t *testing.T) {
	b, fx := setup(t)
	ctx := t.Context()
	for _, check := range []bool{false, true} {
		resp, err := b.LoadImage(ctx, &sandbox.LoadImageRequest{Image: fx.Img.Ref, Layout: fx.Img.Layout, CheckOnly: check})
		if err != nil || !resp.Present || resp.ImageID != fx.Img.ConfigDigest {
			t.Fatalf("LoadImage(check only %v) = %+v, %v; want present as %s", check, resp, err, fx.Img.ConfigDigest)
		}
	}
	out, err := podmanCLI("image", "inspect", "--format", "{{.Id}}", imageload.Tag(fx.Img.Ref))
	if err != nil || "sha256:"+strings.TrimSpace(out) != fx.Img.ConfigDigest {
		t.Fatalf("podman has %s as %q (%v), want %s", imageload.Tag(fx.Img.Ref), out, err, fx.Img.ConfigDigest)
	}

	img, err := random.Image(512, 1)
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
	d, _ := img.Digest()
	c, _ := img.ConfigName()
	ref := "agentnode/loadtest@" + d.String()
	if resp, err := b.LoadImage(ctx, &sandbox.LoadImageRequest{Image: ref, Layout: dir, CheckOnly: true}); err != nil || resp.Present {
		t.Fatalf("LoadImage(check only) of an image never loaded = %+v, %v", resp, err)
	}
	ls, _ := img.Layers()
	ld, _ := ls[0].Digest()
	lp := filepath.Join(dir, "blobs", "sha256", ld.Hex)
	data, err := os.ReadFile(lp)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	if err := os.WriteFile(lp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if resp, err := b.LoadImage(ctx, &sandbox.LoadImageRequest{Image: ref, Layout: dir}); !errors.Is(err, imageload.ErrDigestMismatch) {
		t.Fatalf("LoadImage of a changed layer = %+v, %v; want ErrDigestMismatch", resp, err)
	}
	if _, err := podmanCLI("image", "exists", c.Hex); err == nil {
		t.Errorf("podman has image %s after a refused load", c)
	}
}
