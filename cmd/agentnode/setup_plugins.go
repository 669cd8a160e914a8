package main

import (
	"fmt"

	"github.com/agentnode/agentnode/cmd/agentnode/plugincat"
	"github.com/spf13/cobra"
)

// Setup pins the bundled plugins it finds beside agentnode. They ship with
// the binary (whoever can replace them can replace agentnode itself), so
// setup re-pins them after an upgrade; third-party plugins in
// $AGENTNODE_HOME/plugins are pinned only by `agentnode plugins pin`.
func init() {
	setupHooks = append(setupHooks, func(cmd *cobra.Command, homeDir string) error {
		pins, err := plugincat.PinBundled(homeDir, "")
		if err != nil {
			return fmt.Errorf("pin bundled plugins: %w", err)
		}
		for _, p := range pins {
			fmt.Fprintf(cmd.ErrOrStderr(), "pinned %s-%s %s\n", p.Kind, p.Name, p.SHA256[:16])
		}
		return nil
	})
}
