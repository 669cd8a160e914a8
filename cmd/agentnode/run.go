package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agentnode/agentnode/cmd/agentnode/runtrace"
	"github.com/agentnode/agentnode/cmd/agentnode/termsafe"
	"github.com/agentnode/agentnode/executor"
	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/dispatch"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/policy"
	"github.com/agentnode/agentnode/kernel/reason"
)

func init() { register(newRunCmd) }

func newRunCmd() *cobra.Command {
	var (
		input, inputFile string
		jsonOut, dryRun  bool
		workspace        string
		traceOn          bool
	)
	cmd := &cobra.Command{
		Use:   "run PKG TOOL --input JSON|--input-file F",
		Short: "Decide, audit and run one tool of an installed package",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var tr *runtrace.Trace
			if traceOn {
				tr = runtrace.New()
			}
			k, cleanup, err := newTracedKernel(tr)
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			defer cleanup()
			k.Warm() // the plugins start while the rest is set up
			raw, err := readInput(input, inputFile, cmd.Flags().Changed("input"))
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			if cmd.Flags().Changed("workspace") {
				// Refused here, before anything is decided or run.
				if workspace, err = dispatch.ResolveWorkspace(workspace, k.HomeDir); err != nil {
					return fail(cmd, jsonOut, err)
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, runErr := k.Run(ctx, &dispatch.Request{Package: args[0], Tool: args[1], Input: raw, DryRun: dryRun, Workspace: workspace})
			return printRun(cmd, jsonOut, res, runErr, tr)
		},
	}
	cmd.Flags().StringVar(&input, "input", "", "tool input as a JSON object")
	cmd.Flags().StringVar(&inputFile, "input-file", "", "read the tool input from a file (- for stdin)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the decision and result as JSON")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "decide and print the decision and placement; run nothing, audit nothing")
	cmd.Flags().StringVar(&workspace, "workspace", "", "a directory of yours the tool may use, as its permissions.filesystem.level grants (workspace_read: read-only; workspace_write, any: read-write)")
	cmd.Flags().BoolVar(&traceOn, "trace", false, "print the time of each stage, audit record write, plugin launch and plugin call of this run to stderr (with --json: in the result's trace array)")
	cmd.MarkFlagsMutuallyExclusive("input", "input-file")
	return cmd
}

// readInput returns the tool input, which must be a JSON object. A file
// (or stdin) holding more than plan.MaxInput bytes, and a --input-file
// that is not a regular file (a FIFO, /dev/zero: read without a bound they
// would block or grow without end), are refused with input_denied before
// anything else is read.
func readInput(input, file string, inputSet bool) (json.RawMessage, error) {
	var data []byte
	switch {
	case file == "-":
		b, err := io.ReadAll(io.LimitReader(os.Stdin, plan.MaxInput+1))
		if err != nil {
			return nil, usageError("read input from stdin: %v", err)
		}
		if len(b) > plan.MaxInput {
			return nil, reason.New(reason.InputDenied, "the input on stdin is larger than %d bytes: %w", plan.MaxInput, plan.ErrInputTooLarge)
		}
		data = b
	case file != "":
		b, err := bounded.ReadFileFollow(file, plan.MaxInput)
		switch {
		case errors.Is(err, bounded.ErrTooLarge):
			return nil, reason.New(reason.InputDenied, "--input-file %s is larger than the tool input limit of %d bytes: %w", file, plan.MaxInput, plan.ErrInputTooLarge)
		case errors.Is(err, bounded.ErrNotRegular):
			return nil, reason.New(reason.InputDenied, "--input-file must be a regular file: %w", err)
		case err != nil:
			return nil, usageError("read --input-file: %v", err)
		}
		data = b
	case inputSet:
		data = []byte(input)
	default:
		data = []byte("{}")
	}
	if err := bounded.JSONDepth(data, plan.MaxInputDepth); err != nil {
		return nil, reason.New(reason.InputDenied, "the tool input is %v: %w", err, plan.ErrInputTooDeep)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return nil, usageError("the tool input must be a JSON object")
	}
	return json.RawMessage(data), nil
}

// newKernel builds the kernel for this process.
func newKernel() (*dispatch.Kernel, func(), error) { return newTracedKernel(nil) }

// newTracedKernel builds the kernel for this process, reporting to tr
// (nil: no trace, and no hooks set).
func newTracedKernel(tr *runtrace.Trace) (*dispatch.Kernel, func(), error) {
	dir, err := home.Dir()
	if err != nil {
		return nil, nil, reason.New(reason.NotSetUp, "%w", err)
	}
	opts := pluginhost.Options{HomeDir: dir, LogOutput: termsafe.NewWriter(os.Stderr)}
	if tr != nil {
		opts.Trace = tr.Launch
	}
	host := pluginhost.New(opts)
	interactive := isInteractive()
	k := &dispatch.Kernel{
		HomeDir:     dir,
		Plugins:     host,
		Environ:     os.Environ(),
		Interactive: interactive,
		Root:        os.Geteuid() == 0,
		Warn:        termsafe.NewWriter(os.Stderr),
		// What runs a decided call: the kernel imports no executor.
		Executors: executor.Registry(),
	}
	if interactive {
		k.Ask = askTTY
	}
	if tr != nil {
		k.Trace = tr.Stage
	}
	if d, err := time.ParseDuration(os.Getenv("AGENTNODE_STAGE_TIMEOUT")); err == nil && d > 0 {
		k.StageTimeout = d
	}
	// The commands using this kernel exit right after cleanup.
	return k, host.Exit, nil
}

// isInteractive implements specs/cli.md (Environment): non-interactive when CI is set
// non-empty/non-false, AGENTNODE_NON_INTERACTIVE=1|true, or stdin is not a TTY.
// The other CI markers Guard knows (GITHUB_ACTIONS, GITLAB_CI, …) count too:
// a CI job with a terminal attached must not wait for an answer either.
func isInteractive() bool {
	if ci := strings.ToLower(os.Getenv("CI")); ci != "" && ci != "false" && ci != "0" {
		return false
	}
	if policy.EnvFrom(os.Environ()).CI {
		return false
	}
	switch strings.ToLower(os.Getenv("AGENTNODE_NON_INTERACTIVE")) {
	case "1", "true":
		return false
	}
	return term.IsTerminal(int(os.Stdin.Fd()))
}

// askTTY asks on the controlling terminal only; EOF or anything but y/yes
// is no.
func askTTY(q string) (bool, error) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return false, fmt.Errorf("open the terminal: %w", err)
	}
	defer tty.Close()
	return askOn(tty, q)
}

// askOn prints q on tty and reads the answer. The kernel and the executors
// pass the question as they built it, with text a package or a plugin
// chose in it (an inspector's reason): it is printed escaped (termsafe.Line).
func askOn(tty io.ReadWriter, q string) (bool, error) {
	if _, err := fmt.Fprint(tty, termsafe.Line(q)); err != nil {
		return false, err
	}
	line, err := bufio.NewReader(tty).ReadString('\n')
	if err != nil && line == "" {
		return false, nil // EOF means no
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// printRun prints a run's outcome. Everything in it that a tool, a package
// or a plugin chose (the tool's stderr, its error and result, the trust
// level, reasons) is escaped by termsafe. The line of a failed request says
// what failed: "deny:" for a refusal of the decision stages, "tool
// failed:" when the tool ran and failed (timeout, killed for memory), and
// "error:" when the allowed run could not be completed (sandbox cleanup
// not proven, audit); a refusal never prints "allow". With a trace (tr
// non-nil), the trace goes to stderr before the outcome, or with jsonOut
// into the JSON result as its "trace" array.
func printRun(cmd *cobra.Command, jsonOut bool, res *dispatch.Result, runErr error, tr *runtrace.Trace) error {
	out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	code := reason.Code(res.Code)
	if res.Stderr != "" {
		stderr := termsafe.Text(res.Stderr)
		fmt.Fprint(errw, stderr)
		if !strings.HasSuffix(stderr, "\n") {
			fmt.Fprintln(errw)
		}
	}
	if tr != nil && !jsonOut {
		tr.Print(errw)
	}
	if jsonOut {
		var v any = res
		if tr != nil {
			v = struct {
				*dispatch.Result
				Trace []runtrace.Event `json:"trace"`
			}{res, tr.Finish()}
		}
		_ = writeJSON(out, v)
	} else if res.DryRun {
		fmt.Fprintf(out, "decision:  %s\nplacement: %s\n", res.Decision, res.Placement)
		if res.Trust != "" {
			fmt.Fprintf(out, "trust:     %s\n", termsafe.Line(res.Trust))
		}
		if res.Backend != "" {
			fmt.Fprintf(out, "backend:   %s\n", termsafe.Line(res.Backend))
		}
		if res.Runtime != "" {
			fmt.Fprintf(out, "runtime:   %s\n", termsafe.Line(res.Runtime))
		}
		if len(res.Actions) > 0 {
			actions := termsafe.Line(strings.Join(res.Actions, ", "))
			if res.RiskBand != "" {
				fmt.Fprintf(out, "actions:   %s (risk %d, %s)\n", actions, res.Risk, res.RiskBand)
			} else {
				// Refused before the policy stage scored it.
				fmt.Fprintf(out, "actions:   %s\n", actions)
			}
		}
		if res.Workspace != nil {
			fmt.Fprintf(out, "workspace: %s\n", termsafe.Line(res.Workspace.String()))
		}
		if res.Code != "" {
			fmt.Fprintf(out, "code:      %s\nreason:    %s\n", res.Code, termsafe.Line(res.Reason))
		}
	}
	if runErr != nil {
		exit := code.ExitCode()
		if code == "" {
			exit = reason.ExitFailed
		}
		if !jsonOut && !res.DryRun {
			fmt.Fprintf(errw, "agentnode: %s: %s [%s]\n", outcomeWord(res, exit), termsafe.Text(runErr.Error()), code)
		}
		return &failure{exit: exit, err: runErr, printed: true}
	}
	if res.DryRun {
		return nil
	}
	if !jsonOut {
		if res.OK != nil && *res.OK {
			fmt.Fprintln(out, string(termsafe.JSON(res.Output)))
		} else {
			fmt.Fprintf(errw, "agentnode: tool failed: %s\n", termsafe.Line(res.Error))
		}
	}
	if res.OK == nil || !*res.OK {
		return exitWith(reason.ExitFailed)
	}
	return nil
}

// outcomeWord names what happened to a request that ended in an error:
// refused by the decision ("deny"), run and failed ("tool failed", exit 1),
// or allowed but not completed ("error").
func outcomeWord(res *dispatch.Result, exit int) string {
	switch {
	case res.Decision != string(policy.Allow):
		return string(policy.Deny)
	case res.Ran && exit == reason.ExitFailed:
		return "tool failed"
	}
	return "error"
}
