package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/dispatch"
)

func init() { register(newGuardCmd) }

func newGuardCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "guard",
		Short: "Show, test and change Guard's policy",
		Long: `Show, test and change Guard's policy.

  guard policy              the effective policy: verdict per action type,
                            strict mode, risk bands, tool overrides, rate
                            limits, the inspector chain, the permission
                            ceiling
  guard check PKG/TOOL      decide a call like run --dry-run: runs nothing,
                            audits nothing, consumes no rate limit
  guard set ACTION VALUE    set guard.ACTION (allow|prompt|deny), like
                            agentnode config set guard.ACTION VALUE`,
		// An unknown subcommand is a usage error (exit 2), not help.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newGuardPolicyCmd(), newGuardCheckCmd(), newGuardSetCmd())
	return cmd
}

func newGuardPolicyCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Print the effective Guard policy",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, cleanup, err := newKernel()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			defer cleanup()
			p, err := guardPolicy(k)
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), p)
			}
			printGuardPolicy(cmd, p)
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the policy as one JSON object")
	return cmd
}

func printGuardPolicy(cmd *cobra.Command, p *GuardPolicy) {
	w := cmd.OutOrStdout()
	mode := "default"
	if p.Strict {
		mode = "strict (" + p.StrictSource + ")"
	}
	fmt.Fprintf(w, "mode:        %s\n", mode)
	if p.Interactive {
		fmt.Fprintln(w, "interactive: yes (prompts ask on the terminal, [y/N])")
	} else {
		fmt.Fprintln(w, "interactive: no (every prompt is a deny: policy_prompt)")
	}
	fmt.Fprintln(w, "actions:")
	for _, a := range p.Actions {
		fmt.Fprintf(w, "  %-15s %-6s (%s)\n", a.Action, a.Verdict, a.Source)
	}
	fmt.Fprintln(w, "risk bands:")
	for _, b := range p.RiskBands {
		fmt.Fprintf(w, "  %-8s ≥ %-3d %s\n", b.Band, b.MinScore, b.Effect)
	}
	note := ""
	if !p.OverridesApply {
		note = " (ignored in strict mode)"
	}
	fmt.Fprintf(w, "tool overrides:%s\n", note)
	if len(p.ToolOverrides)+len(p.ToolActionOverrides) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, t := range slices.Sorted(maps.Keys(p.ToolOverrides)) {
		fmt.Fprintf(w, "  %-30s %s\n", t, p.ToolOverrides[t])
	}
	for _, t := range slices.Sorted(maps.Keys(p.ToolActionOverrides)) {
		m := p.ToolActionOverrides[t]
		var per []string
		for _, a := range slices.Sorted(maps.Keys(m)) {
			per = append(per, a+"="+m[a])
		}
		fmt.Fprintf(w, "  %-30s %s; other action types: the policy\n", t, strings.Join(per, ", "))
	}
	if len(p.AgentPreApproved) > 0 {
		fmt.Fprintf(w, "agent pre-approved actions (guard.agent_overrides, for the tool calls the agent makes)%s:\n", note)
		for _, a := range slices.Sorted(maps.Keys(p.AgentPreApproved)) {
			fmt.Fprintf(w, "  %-30s %s\n", a, strings.Join(p.AgentPreApproved[a], ", "))
		}
	}
	fmt.Fprintf(w, "rate limits (per package, kept in %s):\n", p.RateLimits.StateFile)
	for _, t := range slices.Sorted(maps.Keys(p.RateLimits.Defaults)) {
		fmt.Fprintf(w, "  %-30s %s\n", "default "+t, p.RateLimits.Defaults[t])
	}
	for _, pkg := range slices.Sorted(maps.Keys(p.RateLimits.Packages)) {
		fmt.Fprintf(w, "  %-30s %s\n", pkg, p.RateLimits.Packages[pkg])
	}
	chain := strings.Join(p.Inspectors, " → ")
	if chain == "" {
		chain = "(none: argument inspection is off)"
	}
	fmt.Fprintf(w, "inspectors:  %s\n", chain)
	fmt.Fprintln(w, "max permissions (guard.max_permissions, permissions.* deny; a package declaring more is denied):")
	printLevels(w, p.MaxPermissions)
	if p.PromptPermissions != (MaxPermissions{}) {
		fmt.Fprintln(w, "prompt above (permissions.* prompt, sandboxed; a package declaring more is prompted for):")
		printLevels(w, p.PromptPermissions)
	}
}

// checkTarget is PKG/TOOL: a package id and a tool name (the shape of a
// guard.tool_overrides key).
var checkTarget = regexp.MustCompile(`^([a-z0-9-]{3,60})/([^/\s]{1,128})$`)

func newGuardCheckCmd() *cobra.Command {
	var (
		input, inputFile string
		jsonOut          bool
	)
	cmd := &cobra.Command{
		Use:   "check PKG/TOOL --input JSON",
		Short: "Decide a call without running it: audits nothing, consumes no rate limit",
		Long: `Decide a call of PKG/TOOL with the given input through the same pipeline
as run --dry-run (config, lockfile, artifact, trust, placement, policy, rate
limit, inspectors) and print the decision. Nothing runs, nothing is audited,
no rate limit is consumed. Exit 0 for allow or prompt, 3 for a refusal, 2 for
bad usage or configuration.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m := checkTarget.FindStringSubmatch(args[0])
			if m == nil {
				return fail(cmd, jsonOut, usageError("guard check: %q is not PKG/TOOL (a package id of 3-60 characters a-z, 0-9, -, a slash, a tool name), e.g. acme-pack/search", args[0]))
			}
			raw, err := readInput(input, inputFile, cmd.Flags().Changed("input"))
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			k, cleanup, err := newKernel()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			defer cleanup()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, runErr := k.Run(ctx, &dispatch.Request{Package: m[1], Tool: m[2], Input: raw, DryRun: true})
			err = printRun(cmd, jsonOut, res, runErr, nil)
			if !jsonOut {
				w := cmd.OutOrStdout()
				if len(res.GuardChain) > 0 {
					fmt.Fprintf(w, "guard:     %s\n", strings.Join(res.GuardChain, ", "))
				}
				if res.Code == "" && res.Reason != "" {
					fmt.Fprintf(w, "reason:    %s\n", res.Reason)
				}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&input, "input", "", "tool input as a JSON object (default {})")
	cmd.Flags().StringVar(&inputFile, "input-file", "", "read the tool input from a file (- for stdin)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the decision as JSON")
	cmd.MarkFlagsMutuallyExclusive("input", "input-file")
	return cmd
}

func newGuardSetCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "set ACTION allow|prompt|deny",
		Short: "Set the global verdict of an action type (guard.ACTION)",
		Long: "Set the global verdict of an action type; the same as\n" +
			"agentnode config set guard.ACTION VALUE. Action types: " + strings.Join(config.Actions, ", ") + ".",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			action, value := args[0], args[1]
			if !slices.Contains(config.Actions, action) {
				return fail(cmd, jsonOut, usageError("guard set: unknown action type %q; action types: %s",
					action, strings.Join(config.Actions, ", ")))
			}
			switch value {
			case config.Allow, config.Prompt, config.Deny:
			default:
				return fail(cmd, jsonOut, usageError("guard set %s: %q is not a verdict; use allow, prompt or deny", action, value))
			}
			path, err := configPath()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			key := "guard." + action
			if err := configedit.Set(path, key, value); err != nil {
				return fail(cmd, jsonOut, err)
			}
			if strict, err := configedit.Get(path, "guard.strict"); err == nil && strict == true {
				fmt.Fprintf(cmd.ErrOrStderr(), "agentnode: warning: guard.strict is on: the strict policy applies and %s has no effect until it is off\n", key)
			} else if envTrueOS("AGENTNODE_GUARD_STRICT") {
				fmt.Fprintf(cmd.ErrOrStderr(), "agentnode: warning: AGENTNODE_GUARD_STRICT is set: the strict policy applies and %s has no effect while it is\n", key)
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

func envTrueOS(key string) bool {
	switch strings.ToLower(os.Getenv(key)) {
	case "1", "true", "yes":
		return true
	}
	return false
}

func printLevels(w io.Writer, m MaxPermissions) {
	for _, l := range []struct{ kind, level string }{
		{"network", m.Network},
		{"filesystem", m.Filesystem},
		{"code_execution", m.CodeExecution},
	} {
		if l.level == "" {
			l.level = "(no limit)"
		}
		fmt.Fprintf(w, "  %-15s %s\n", l.kind, l.level)
	}
}
