package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/imageload"
)

// randomLayout writes a random one-layer image into a fresh OCI layout and
// returns the layout, the reference pinning it and its config digest.
func randomLayout(t *testing.T) (string, string, string) {
	t.Helper()
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
	return dir, "agentnode/loadtest@" + d.String(), c.String()
}

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

	dir, ref, id := randomLayout(t)
	if resp, err := b.LoadImage(ctx, &sandbox.LoadImageRequest{Image: ref, Layout: dir, CheckOnly: true}); err != nil || resp.Present {
		t.Fatalf("LoadImage(check only) of an image never loaded = %+v, %v", resp, err)
	}
	// Change a byte of the layer: nothing is loaded.
	img, _ := layout.Path(dir).Image(mustHash(t, ref))
	ls, _ := img.Layers()
	ld, _ := ls[0].Digest()
	p := filepath.Join(dir, "blobs", "sha256", ld.Hex)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
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

func mustHash(t *testing.T, ref string) v1.Hash {
	t.Helper()
	h, err := v1.NewHash(ref[strings.LastIndex(ref, "@")+1:])
	if err != nil {
		t.Fatal(err)
	}
	return h
}
