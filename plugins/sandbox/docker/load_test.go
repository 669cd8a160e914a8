package main

import (
	"errors"
	"testing"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/imageload"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// TestLoadImage: the image `agentnode sandbox build` made loads (again:
// loading twice is fine) under its config digest; an image the engine does
// not have is absent; a layout whose layer was changed loads nothing.
func TestLoadImage(t *testing.T) {
	e := testEnv(t)
	b := newTestBackend(t, e)
	ctx := t.Context()
	resp, err := b.LoadImage(ctx, &sandbox.LoadImageRequest{Image: e.img.Ref, Layout: e.img.Layout})
	if err != nil || !resp.Present || resp.ImageID != e.img.ConfigDigest {
		t.Fatalf("LoadImage = %+v, %v; want present as %s", resp, err, e.img.ConfigDigest)
	}
	resp, err = b.LoadImage(ctx, &sandbox.LoadImageRequest{Image: e.img.Ref, Layout: e.img.Layout, CheckOnly: true})
	if err != nil || !resp.Present || resp.ImageID != e.img.ConfigDigest {
		t.Fatalf("LoadImage(check only) = %+v, %v", resp, err)
	}
	res, err := e.cli.ImageInspect(ctx, imageload.Tag(e.img.Ref))
	if err != nil || res.ID != e.img.ConfigDigest {
		t.Fatalf("the engine has %s as %q (%v), want %s", imageload.Tag(e.img.Ref), res.ID, err, e.img.ConfigDigest)
	}

	dir, ref, id, layer := sandboxtest.RandomLayout(t)
	if resp, err := b.LoadImage(ctx, &sandbox.LoadImageRequest{Image: ref, Layout: dir, CheckOnly: true}); err != nil || resp.Present {
		t.Fatalf("LoadImage(check only) of an image never loaded = %+v, %v", resp, err)
	}
	// Change a byte of the layer: nothing is loaded.
	sandboxtest.FlipByte(t, layer)
	if resp, err := b.LoadImage(ctx, &sandbox.LoadImageRequest{Image: ref, Layout: dir}); !errors.Is(err, imageload.ErrDigestMismatch) {
		t.Fatalf("LoadImage of a changed layer = %+v, %v; want ErrDigestMismatch", resp, err)
	}
	if _, err := e.cli.ImageInspect(ctx, id); err == nil {
		t.Errorf("the engine has image %s after a refused load", id)
	}
	if _, err := b.LoadImage(ctx, &sandbox.LoadImageRequest{Image: "busybox:latest", Layout: dir}); err == nil {
		t.Error("LoadImage of an unpinned reference accepted")
	}
}
