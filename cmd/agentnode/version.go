package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/agentnode/agentnode/sdk/plugin"
)

func init() { register(newVersionCmd) }

func newVersionCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the agentnode version and the plugin API versions it speaks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := map[string]any{
				"version":             version,
				"go":                  runtime.Version(),
				"plugin_api_versions": plugin.SupportedAPIVersions,
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), v)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "agentnode %s (%s, plugin API %v)\n", version, runtime.Version(), plugin.SupportedAPIVersions)
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}
