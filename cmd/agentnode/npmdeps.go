package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentnode/agentnode/cmd/agentnode/imagebuild"
	"github.com/agentnode/agentnode/cmd/agentnode/nodeimage"
	"github.com/agentnode/agentnode/cmd/agentnode/npmdeps"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/reason"
)

// buildNodeInstaller is `agentnode sandbox build --node-installer`: the
// Node installer image (nodeimage.BuildInstaller: Debian's nodejs and npm,
// downloaded by apt), loaded into Docker and Podman when they are
// installed, pinned in sandbox.node_installer_image when that is absent.
func buildNodeInstaller(cmd *cobra.Command, jsonOut bool, busybox string) error {
	return buildInstaller(cmd, jsonOut, "sandbox.node_installer_image",
		"building the Node installer image from Debian's nodejs and npm (downloaded by apt; this takes a while) …",
		func(dir string, _ *config.Config) (*image.Image, any, string, error) {
			img, contents, err := nodeimage.BuildInstaller(cmd.Context(), dir, nodeimage.Options{Base: imagebuild.BuildOptions{BusyboxPath: busybox}})
			if err != nil {
				return nil, nil, "", err
			}
			return img, contents, fmt.Sprintf("%d Debian packages, %d files, %d bytes", len(contents.Packages), contents.Files, contents.Bytes), nil
		}, func(cfg *config.Config) string { return cfg.Sandbox.NodeInstallerImage })
}

// installNPM installs the locked npm tree of an mcp_server package
// (npmdeps.Needed) with npm ci in the configured sandbox backend on
// sandbox.node_installer_image (cmd/agentnode/npmdeps): offline from the
// npm cache directory --npm-cache names, or from the registry
// --npm-registry names through a sealed egress proxy allowing its host
// alone.
func installNPM(ctx context.Context, dir string, src depsSource, content string, m *manifest.Manifest, host **pluginhost.Host) ([]string, error) {
	if _, err := npmdeps.Check(content, m.MCP.Install); err != nil {
		return nil, err
	}
	if src.npmCache == "" && src.npmReg == nil {
		return nil, fmt.Errorf("%w: %s has no node_modules and a %s: give the npm cache its packages are installed from with --npm-cache DIR, or the registry with --npm-registry URL",
			npmdeps.ErrLock, m.PackageID, npmdeps.LockFile)
	}
	cfg, err := config.Load(home.ConfigPath(dir))
	if err != nil {
		return nil, err
	}
	if cfg.Sandbox.NodeInstallerImage == "" {
		return nil, reason.New(reason.ImageUnpinned,
			"%s installs its npm tree at install, and sandbox.node_installer_image is not set: build the installer image with `agentnode sandbox build --node-installer`",
			m.PackageID)
	}
	box, err := installSandbox(ctx, dir, cfg, cfg.Sandbox.NodeInstallerImage, host) // pydeps.go
	if err != nil {
		return nil, err
	}
	in := &npmdeps.Installer{Sandbox: box.client, Backend: box.backend, Image: box.img, Cache: src.npmCache,
		Limits: box.limits, Timeout: box.timeout, RunID: fmt.Sprintf("an-npm-%d", time.Now().UnixNano())}
	if src.npmReg == nil {
		return in.Install(ctx, content, m)
	}
	return withEgress(ctx, dir, cfg, *host, box.backend, m, src.npmReg.Host, // pydeps.go
		fmt.Sprintf("installing the npm tree of %s from %s", m.PackageID, src.npmReg.URL),
		func(ctx context.Context, socket string) ([]string, error) {
			in.Registry, in.EgressSocket, in.CertPEM = src.npmReg.URL, socket, src.npmReg.CertPEM
			return in.Install(ctx, content, m)
		})
}
