package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/imageload"
)

var _ sandbox.ImageLoader = (*backend)(nil)

// loadTimeout bounds `podman load` of one image.
const loadTimeout = 5 * time.Minute

// LoadImage loads req.Image from the OCI layout req.Layout into podman's
// storage (`podman load` of a docker-archive tagged
// imageload.Tag(req.Image)), then checks that podman reports the image ID,
// the config digest, for that tag. With req.CheckOnly it only looks the
// image up by its config digest.
func (b *backend) LoadImage(ctx context.Context, req *sandbox.LoadImageRequest) (*sandbox.LoadImageResponse, error) {
	if req == nil {
		return nil, errors.New("podman: nil LoadImageRequest")
	}
	img, err := imageload.Open(req.Layout, req.Image)
	if err != nil {
		return nil, fmt.Errorf("podman: load %s: %w", req.Image, err)
	}
	e, err := b.engine(ctx)
	if err != nil {
		return nil, fmt.Errorf("podman: %w", err)
	}
	want := img.ConfigDigest.Hex
	if req.CheckOnly {
		id, err := e.imageID(ctx, want)
		var ce *cliError
		if errors.As(err, &ce) && ce.code == 125 {
			return &sandbox.LoadImageResponse{Detail: "no image sha256:" + want + " in podman's storage"}, nil
		}
		if err != nil {
			return nil, err
		}
		return &sandbox.LoadImageResponse{Present: id == want, ImageID: "sha256:" + id, Detail: "image sha256:" + id + " in podman's storage"}, nil
	}

	lctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(img.WriteArchive(pw)) }()
	cmd := e.command("load", "--quiet")
	cmd.Stdin = pr
	_, err = runCmd(lctx, cmd)
	_ = pr.CloseWithError(errors.New("podman load exited"))
	if err != nil {
		return nil, fmt.Errorf("podman: load %s: %w", req.Image, err)
	}
	id, err := e.imageID(ctx, img.Tag)
	if err != nil {
		return nil, fmt.Errorf("podman: load %s: the image is not there afterwards: %w", req.Image, err)
	}
	if id != want {
		return nil, fmt.Errorf("podman reports image ID sha256:%s for %s, want sha256:%s (the config digest)", id, img.Tag, want)
	}
	return &sandbox.LoadImageResponse{Present: true, ImageID: "sha256:" + id, Detail: "loaded as " + img.Tag + " into podman's storage"}, nil
}

// imageID asks podman for the ID (64 hex digits) of the image ref.
func (e *engine) imageID(ctx context.Context, ref string) (string, error) {
	out, err := e.call(ctx, "image", "inspect", "--format", "{{.Id}}", ref)
	if err != nil {
		return "", err
	}
	id := strings.TrimPrefix(strings.TrimSpace(string(out)), "sha256:")
	if !hexID.MatchString(id) {
		return "", fmt.Errorf("podman image inspect %s: unexpected ID %q", ref, id)
	}
	return id, nil
}
