package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/imageload"
)

var _ sandbox.ImageLoader = (*backend)(nil)

// maxLoadAnswer bounds the engine's load progress stream read.
const maxLoadAnswer = 4 << 20

// LoadImage loads req.Image from the OCI layout req.Layout into the engine
// (the Engine API's image load, a docker-archive tagged
// imageload.Tag(req.Image)), then checks that the engine reports the image
// ID, the config digest, for that tag. With req.CheckOnly it only looks the
// image up by its config digest.
func (b *backend) LoadImage(ctx context.Context, req *sandbox.LoadImageRequest) (*sandbox.LoadImageResponse, error) {
	if req == nil {
		return nil, errors.New("docker: nil LoadImageRequest")
	}
	img, err := imageload.Open(req.Layout, req.Image)
	if err != nil {
		return nil, fmt.Errorf("docker: load %s: %w", req.Image, err)
	}
	cli, err := b.client(ctx)
	if err != nil {
		return nil, err
	}
	want := img.ConfigDigest.String()
	if req.CheckOnly {
		id, err := b.imageID(ctx, cli, want)
		if cerrdefs.IsNotFound(err) {
			return &sandbox.LoadImageResponse{Detail: "no image " + want + " in the engine at " + b.ep.host}, nil
		}
		if err != nil {
			return nil, err
		}
		return &sandbox.LoadImageResponse{Present: id == want, ImageID: id, Detail: "image " + id + " in the engine at " + b.ep.host}, nil
	}

	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(img.WriteArchive(pw)) }()
	res, err := cli.ImageLoad(ctx, pr, client.ImageLoadWithQuiet(true))
	if err != nil {
		_ = pr.CloseWithError(err)
		return nil, fmt.Errorf("docker: load %s: %w", req.Image, err)
	}
	err = loadStreamError(res)
	_ = res.Close()
	_ = pr.Close()
	if err != nil {
		return nil, fmt.Errorf("docker: load %s: %w", req.Image, err)
	}
	id, err := b.imageID(ctx, cli, img.Tag)
	if err != nil {
		return nil, fmt.Errorf("docker: load %s: the image is not there afterwards: %w", req.Image, err)
	}
	if id != want {
		return nil, fmt.Errorf("docker: the engine reports image ID %s for %s, want %s (the config digest)", id, img.Tag, want)
	}
	return &sandbox.LoadImageResponse{Present: true, ImageID: id, Detail: "loaded as " + img.Tag + " into the engine at " + b.ep.host}, nil
}

// imageID asks the engine for the ID of the image ref.
func (b *backend) imageID(ctx context.Context, cli *client.Client, ref string) (string, error) {
	res, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("docker: image inspect %s: %w", ref, err)
	}
	return res.ID, nil
}

// loadStreamError reads the engine's load progress (JSON messages) to the
// end and returns the error one of them reports.
func loadStreamError(r io.Reader) error {
	dec := json.NewDecoder(io.LimitReader(r, maxLoadAnswer))
	for {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the engine's answer: %w", err)
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return errors.New(m.ErrorDetail.Message)
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
	}
}
