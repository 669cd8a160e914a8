package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/imageload"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
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

	dir, ref, id, layer := sandboxtest.RandomLayout(t)
	if resp, err := b.LoadImage(ctx, &sandbox.LoadImageRequest{Image: ref, Layout: dir, CheckOnly: true}); err != nil || resp.Present {
		t.Fatalf("LoadImage(check only) of an image never loaded = %+v, %v", resp, err)
	}
	sandboxtest.FlipByte(t, layer)
	if resp, err := b.LoadImage(ctx, &sandbox.LoadImageRequest{Image: ref, Layout: dir}); !errors.Is(err, imageload.ErrDigestMismatch) {
		t.Fatalf("LoadImage of a changed layer = %+v, %v; want ErrDigestMismatch", resp, err)
	}
	if _, err := podmanCLI("image", "exists", strings.TrimPrefix(id, "sha256:")); err == nil {
		t.Errorf("podman has image %s after a refused load", id)
	}
}
