package main

import (
	"errors"
	"fmt"
	"io/fs"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agentnode/agentnode/cmd/agentnode/plugincat"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/pluginhost"
)

func init() { register(newPluginsCmd) }

func newPluginsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugins",
		Short: "List plugin binaries and pin them by SHA-256",
		Long: "Plugins are executables named agentnode-<kind>-<name> beside the agentnode binary or in\n" +
			"$AGENTNODE_HOME/plugins; the one beside agentnode wins. A plugin runs only when its path and\n" +
			"SHA-256 match its pin in $AGENTNODE_HOME/plugins/pins.json. See specs/plugins.md.",
	}
	cmd.AddCommand(newPluginsListCmd(), newPluginsPinCmd())
	return cmd
}

// pluginDirs returns the agentnode home and the bundled plugin directory.
func pluginDirs() (homeDir, binDir string, err error) {
	if homeDir, err = home.Dir(); err != nil {
		return "", "", err
	}
	if binDir, err = pluginhost.DefaultBinDir(); err != nil {
		return "", "", err
	}
	return homeDir, binDir, nil
}

type pluginsListOutput struct {
	BinDir     string            `json:"bin_dir"`
	PluginsDir string            `json:"plugins_dir"`
	PinsFile   string            `json:"pins_file"`
	Plugins    []plugincat.Entry `json:"plugins"`
}

func newPluginsListCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List plugin binaries with their pin and hash status",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			homeDir, binDir, err := pluginDirs()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			entries, err := plugincat.Discover(homeDir, binDir)
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			out := pluginsListOutput{
				BinDir: binDir, PluginsDir: home.PluginsDir(homeDir), PinsFile: pluginhost.PinsPath(homeDir),
				Plugins: entries,
			}
			if out.Plugins == nil {
				out.Plugins = []plugincat.Entry{}
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			w := cmd.OutOrStdout()
			if len(entries) == 0 {
				fmt.Fprintf(w, "no plugins in %s or %s\n", out.BinDir, out.PluginsDir)
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KIND\tNAME\tPINNED\tHASH\tSHADOWED\tPATH")
			for _, e := range entries {
				pinned, shadowed := "no", "no"
				if e.Pinned {
					pinned = "yes"
				}
				if e.Shadowed {
					shadowed = "yes"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Kind, e.Name, pinned, e.Hash, shadowed, e.Path)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, e := range entries {
				switch {
				case e.Shadowed:
					fmt.Fprintf(w, "note: %s (%s) is shadowed by %s and never runs\n", e.Key(), e.Path, e.ShadowedBy)
				case e.PinnedPath != "":
					fmt.Fprintf(w, "note: %s is pinned at %s, not at %s; it will be refused\n", e.Key(), e.PinnedPath, e.Path)
				}
				if e.Problem != "" {
					fmt.Fprintf(w, "note: %s: %s\n", e.Key(), e.Problem)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

type pinOutput struct {
	plugincat.PinRecord
	// Active is false when discovery would run another file for this
	// kind/name (or none), so the pin has no effect yet.
	Active  bool   `json:"active"`
	Warning string `json:"warning,omitempty"`
}

func newPluginsPinCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "pin PATH",
		Short: "Pin a plugin binary: record its path and SHA-256 in pins.json",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			homeDir, binDir, err := pluginDirs()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			p, err := plugincat.Pin(homeDir, args[0])
			if errors.Is(err, plugincat.ErrInvalidName) || errors.Is(err, fs.ErrNotExist) {
				return fail(cmd, jsonOut, usageError("%v", err))
			}
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			out := pinOutput{PinRecord: p}
			entries, err := plugincat.Discover(homeDir, binDir)
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			out.Warning = fmt.Sprintf("%s is not in %s or %s, where agentnode looks for plugins",
				p.Path, binDir, home.PluginsDir(homeDir))
			for _, e := range entries {
				if e.Key() != pluginhost.Key(p.Kind, p.Name) || e.Shadowed || e.Source == plugincat.SourcePin {
					continue
				}
				if e.Path == p.Path {
					out.Active, out.Warning = true, ""
				} else {
					out.Warning = fmt.Sprintf("%s runs %s, not the pinned file; it will be refused", pluginhost.Key(p.Kind, p.Name), e.Path)
				}
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pinned %s: %s sha256:%s\n", pluginhost.Key(p.Kind, p.Name), p.Path, p.SHA256)
			if out.Warning != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "agentnode: warning: %s\n", out.Warning)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}
