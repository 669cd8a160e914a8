package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentnode/agentnode/cmd/agentnode/imagebuild"
	"github.com/agentnode/agentnode/cmd/agentnode/nodeimage"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/image"
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
