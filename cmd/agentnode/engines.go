package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/agentnode/agentnode/cmd/agentnode/plugincat"
	"github.com/agentnode/agentnode/cmd/agentnode/termsafe"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// loadTimeout bounds one backend's load of one image.
const loadTimeout = 10 * time.Minute

// engineLoad is the outcome of loading the image into one engine.
type engineLoad struct {
	Engine string `json:"engine"` // the sandbox backend (docker, podman)
	Loaded bool   `json:"loaded"`
	Error  string `json:"error,omitempty"`
}

// imageEngines are the sandbox backends that keep images in an engine of
// their own (sandbox.ImageLoader: Docker, Podman), started as every plugin
// is (pinned, through kernel/pluginhost). agentnode itself never drives a
// container engine: the backends load images and answer whether their
// engine has one. A backend that needs no load (libcontainer runs the
// verified rootfs) or whose engine is not installed is left out.
type imageEngines struct {
	homeDir string
	host    *pluginhost.Host
	clients map[string]*sandbox.Client // backends whose engine is installed
	order   []string
	started bool
}

func newImageEngines(homeDir string) *imageEngines {
	return &imageEngines{homeDir: homeDir, host: pluginhost.New(pluginhost.Options{HomeDir: homeDir, LogOutput: termsafe.NewWriter(os.Stderr)}),
		clients: map[string]*sandbox.Client{}}
}

func (e *imageEngines) close() { e.host.Close() }

// start starts every pinned sandbox backend once and keeps those that can
// load images and whose engine is installed. A backend that cannot be
// started or asked is kept, so that using it reports why.
func (e *imageEngines) start(ctx context.Context) {
	if e.started {
		return
	}
	e.started = true
	binDir, _ := pluginhost.DefaultBinDir()
	entries, _ := plugincat.Discover(e.homeDir, binDir)
	for _, en := range entries {
		if en.Kind != plugin.KindSandbox || en.Shadowed || !en.Pinned || en.Hash != plugincat.HashOK {
			continue
		}
		c, err := e.host.Sandbox(ctx, en.Name)
		if err != nil {
			continue
		}
		// A probe that loads nothing: does the backend load images at all?
		if _, err := c.LoadImage(ctx, &sandbox.LoadImageRequest{CheckOnly: true}); errors.Is(err, sandbox.ErrNoImageLoad) {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, e.host.CallTimeout())
		av, err := c.Availability(actx, &sandbox.AvailabilityRequest{})
		cancel()
		if err == nil && !av.Available && av.Reason == sandbox.ReasonNotInstalled {
			continue
		}
		e.clients[en.Name] = c
		e.order = append(e.order, en.Name)
	}
}

// load loads img into every engine; a failure is reported, not an error.
// progress, when not nil, is told each engine before its load.
func (e *imageEngines) load(ctx context.Context, img *image.Image, progress func(engine string)) []engineLoad {
	e.start(ctx)
	loads := []engineLoad{}
	for _, name := range e.order {
		if progress != nil {
			progress(name)
		}
		l := engineLoad{Engine: name, Loaded: true}
		lctx, cancel := context.WithTimeout(ctx, loadTimeout)
		resp, err := e.clients[name].LoadImage(lctx, &sandbox.LoadImageRequest{Image: img.Ref, Layout: img.Layout})
		cancel()
		switch {
		case err != nil:
			l.Loaded, l.Error = false, err.Error()
		case !resp.Present || resp.ImageID != img.ConfigDigest:
			l.Loaded, l.Error = false, fmt.Sprintf("the engine reports image ID %q, want %s (the config digest): %s", resp.ImageID, img.ConfigDigest, resp.Detail)
		}
		loads = append(loads, l)
	}
	return loads
}

// presence maps each engine to "present", "absent" or why it could not be
// asked, for img.
func (e *imageEngines) presence(ctx context.Context, img *image.Image) map[string]string {
	e.start(ctx)
	out := map[string]string{}
	for _, name := range e.order {
		cctx, cancel := context.WithTimeout(ctx, e.host.CallTimeout())
		resp, err := e.clients[name].LoadImage(cctx, &sandbox.LoadImageRequest{Image: img.Ref, Layout: img.Layout, CheckOnly: true})
		cancel()
		switch {
		case err != nil:
			out[name] = err.Error()
		case resp.Present && resp.ImageID == img.ConfigDigest:
			out[name] = "present"
		default:
			out[name] = "absent"
		}
	}
	return out
}
