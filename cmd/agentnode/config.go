package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/reason"
)

func init() { register(newConfigCmd) }

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Read and change config.json (validated against its schema)",
		Long: `Read and change config.json (AGENTNODE_HOME/config.json, or AGENTNODE_CONFIG).

Keys are dotted (sandbox.limits.memory). Map entries are addressed below the
map: guard.tool_overrides.PKG/TOOL, guard.rate_limits.PKG, llm.providers.NAME.
Values are parsed by the key's type: true/false, integers, numbers, strings as
typed, JSON for arrays and objects. See specs/config.md.`,
	}
	cmd.AddCommand(newConfigListCmd(), newConfigGetCmd(), newConfigSetCmd())
	return cmd
}

// configPath is the config file the commands act on.
func configPath() (string, error) {
	dir, err := home.Dir()
	if err != nil {
		return "", reason.Wrap(reason.NotSetUp, err, "")
	}
	return home.ConfigPath(dir), nil
}

func newConfigListCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Print every key with its effective value",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := configPath()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			kvs, err := configedit.List(path)
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			if jsonOut {
				m := make(map[string]any, len(kvs))
				for _, kv := range kvs {
					m[kv.Key] = kv.Value
				}
				return writeJSON(cmd.OutOrStdout(), m)
			}
			for _, kv := range kvs {
				if err := printValue(cmd.OutOrStdout(), kv.Key+" = ", kv.Value); err != nil {
					return fail(cmd, false, err)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object, dotted key → value")
	return cmd
}

func newConfigGetCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "get KEY",
		Short: "Print the effective value of a key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := configPath()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			v, err := configedit.Get(path, args[0])
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"key": args[0], "value": v})
			}
			if err := printValue(cmd.OutOrStdout(), "", v); err != nil {
				return fail(cmd, false, err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, `print {"key":KEY,"value":VALUE}`)
	return cmd
}

func newConfigSetCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "set KEY VALUE",
		Short: "Set a key; the result is validated before anything is written",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := configPath()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			key, value := args[0], args[1]
			if err := configedit.Set(path, key, value); err != nil {
				return fail(cmd, jsonOut, err)
			}
			v, err := configedit.Get(path, key)
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"key": key, "value": v})
			}
			return printValue(cmd.OutOrStdout(), key+" = ", v)
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, `print {"key":KEY,"value":VALUE}, or a refusal object`)
	return cmd
}

// printValue prints a value on one line: strings as they are, everything
// else as JSON.
func printValue(w io.Writer, prefix string, v any) error {
	if s, ok := v.(string); ok {
		_, err := fmt.Fprintf(w, "%s%s\n", prefix, s)
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode value: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s%s\n", prefix, b)
	return err
}
