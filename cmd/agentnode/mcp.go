package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/cmd/agentnode/mcpserve"
	"github.com/agentnode/agentnode/cmd/agentnode/runtrace"
	"github.com/agentnode/agentnode/cmd/agentnode/termsafe"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/dispatch"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

func init() { register(newMCPCmd) }

func newMCPCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the installed tools to MCP clients, every call through agentnode",
	}
	cmd.AddCommand(newMCPServeCmd(), newMCPStatusCmd(), newMCPTokenCmd())
	return cmd
}

func newMCPServeCmd() *cobra.Command {
	var workspace, pkg string
	var web httpFlags
	var traceOn bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a stdio MCP server exposing every installed toolpack tool as <package>__<tool>",
		Long: "A stdio MCP server: each installed toolpack tool is an MCP tool named <package>__<tool> (with\n" +
			"--package PKG: only PKG's tools, under their own names), and every\n" +
			"call is decided, audited and run by agentnode exactly like `agentnode run` (never interactive: a\n" +
			"prompt is a deny). A refusal is a tool error \"deny <code>: <reason>\". Only MCP goes to stdout;\n" +
			"messages go to stderr. Installs and removes while serving are picked up (tools/list_changed).\n\n" +
			"--http ADDR serves Streamable HTTP at http://ADDR/mcp instead (loopback only unless\n" +
			"--http-allow-remote); every request needs \"Authorization: Bearer <token>\" with the token of\n" +
			"`agentnode mcp token`.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			useDefaultGC() // a server runs for long
			dir, err := home.Dir()
			if err != nil {
				return fail(cmd, false, reason.New(reason.NotSetUp, "%w", err))
			}
			if cmd.Flags().Changed("workspace") {
				// Refused before anything is served.
				if workspace, err = dispatch.ResolveWorkspace(workspace, dir); err != nil {
					return fail(cmd, false, err)
				}
			}
			if cmd.Flags().Changed("package") {
				// Refused before anything is served.
				if _, err := mcpserve.ScanPackage(dir, pkg); err != nil {
					return fail(cmd, false, &failure{exit: reason.ExitUsage, err: err})
				}
			}
			var in io.ReadCloser
			var out io.WriteCloser
			web.on = cmd.Flags().Changed("http")
			if !web.on && (cmd.Flags().Changed("http-allow-remote") || cmd.Flags().Changed("http-host")) {
				return fail(cmd, false, usageError("--http-allow-remote and --http-host go with --http ADDR"))
			}
			if web.on {
				if web.addr, err = mcpserve.ListenAddr(web.addr, web.allowRemote); err != nil {
					return fail(cmd, false, usageError("%w", err))
				}
				if web.opts.Token, err = mcpserve.Token(dir); err != nil {
					return fail(cmd, false, usageError("%w", err))
				}
			} else if in, out, err = mcpStdio(cmd); err != nil {
				return fail(cmd, false, err)
			}
			errw := cmd.ErrOrStderr()
			if _, err := os.Stat(home.ConfigPath(dir)); err != nil {
				fmt.Fprintf(errw, "agentnode mcp: warning: agentnode is not set up (%v): every call will be refused\n", err)
			}
			// MCP clients start servers in a directory of their choosing;
			// say which lockfile the calls are checked against.
			fmt.Fprintf(errw, "agentnode mcp: serving %s (lockfile %s)\n", dir, lockfilePath())
			if pkg != "" {
				fmt.Fprintf(errw, "agentnode mcp: package %s only, its tools under their own names\n", termsafe.Line(pkg))
			}
			if workspace != "" {
				fmt.Fprintf(errw, "agentnode mcp: workspace %s, granted to each tool as its filesystem level allows\n", termsafe.Line(workspace))
			}
			k, _, err := newKernel()
			if err != nil {
				return fail(cmd, false, err)
			}
			k.Plugins.Close() // serve brings its own plugin host (mcpserve.Options.NewPlugins)
			k.Warn = errw
			hostOpts, traceW := mcpTrace(traceOn, errw)
			srv := mcpserve.New(mcpserve.Options{
				Kernel: *k,
				NewPlugins: func() *pluginhost.Host {
					o := hostOpts
					o.HomeDir, o.LogOutput = dir, termsafe.NewWriter(os.Stderr)
					return pluginhost.New(o)
				},
				Version:   version,
				Log:       errw,
				Workspace: workspace,
				Package:   pkg,
				Trace:     traceW,
				WarmPool:  warmPool(dir),
			})
			defer srv.Close()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if web.on {
				err = serveMCPHTTP(ctx, srv, &web, dir, errw)
			} else {
				err = srv.Run(ctx, &mcpserve.StdioTransport{Reader: in, Writer: out, MaxFrame: mcpserve.MaxFrame, Log: errw})
			}
			if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
				return fail(cmd, false, fmt.Errorf("mcp serve: %w", err))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&pkg, "package", "", "serve only this installed package's tools, under their own names (no <package>__ prefix)")
	cmd.Flags().StringVar(&web.addr, "http", "", "serve Streamable HTTP on HOST:PORT (e.g. 127.0.0.1:8765; :0 picks a free loopback port) instead of stdio")
	cmd.Flags().BoolVar(&web.allowRemote, "http-allow-remote", false, "let --http listen on a non-loopback address")
	cmd.Flags().StringSliceVar(&web.opts.Hosts, "http-host", nil, "a name accepted in the Host and Origin headers besides localhost and loopback addresses (repeatable)")
	cmd.Flags().BoolVar(&traceOn, "trace", false, "print the time of each stage, audit record write, plugin launch and plugin call of every call to stderr, each line prefixed with the call's request id")
	cmd.Flags().StringVar(&workspace, "workspace", "", "a directory of yours every call may use, as each tool's permissions.filesystem.level grants (workspace_read: read-only; workspace_write, any: read-write)")
	return cmd
}

// warmPool is sandbox.warm_pool of the config in home dir, read when
// serve starts; none when the config cannot be read (every call is then
// refused anyway).
func warmPool(dir string) sandbox.WarmPool {
	c, err := config.Load(home.ConfigPath(dir))
	if err != nil {
		return sandbox.WarmPool{}
	}
	w := c.Sandbox.WarmPool
	return sandbox.WarmPool{Size: w.Size, Idle: time.Duration(w.IdleSeconds) * time.Second}
}

// mcpTrace returns, for `mcp serve --trace`, the plugin host options that
// trace its launches and the writer of the calls' traces (on: both to
// errw; off: no hook and nil).
func mcpTrace(on bool, errw io.Writer) (pluginhost.Options, io.Writer) {
	if !on {
		return pluginhost.Options{}, nil
	}
	return pluginhost.Options{Trace: runtrace.Launches(errw, "agentnode: trace launch: ")}, errw
}

// mcpStdio returns the MCP stream. When it is the process's own stdin and
// stdout, they are moved to new descriptors and fd 0 becomes /dev/null and
// fd 1 a copy of stderr: plugin processes (go-plugin hands them our stdin)
// and anything else that inherits or writes to fds 0 and 1 can neither read
// the client's requests nor corrupt the stream.
//
// The stream is the one output not escaped by termsafe (execute): it is
// JSON-RPC for a program, and encoding/json already escapes control
// characters in it.
func mcpStdio(cmd *cobra.Command) (io.ReadCloser, io.WriteCloser, error) {
	stdout := cmd.OutOrStdout()
	if t, ok := stdout.(*termsafe.Writer); ok {
		stdout = t.Unwrap()
	}
	if cmd.InOrStdin() != os.Stdin || stdout != os.Stdout {
		return io.NopCloser(cmd.InOrStdin()), nopWriteCloser{stdout}, nil
	}
	inFD, err := unix.FcntlInt(0, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, nil, fmt.Errorf("mcp serve: duplicate stdin: %w", err)
	}
	outFD, err := unix.FcntlInt(1, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, nil, fmt.Errorf("mcp serve: duplicate stdout: %w", err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, nil, fmt.Errorf("mcp serve: %w", err)
	}
	defer null.Close()
	if err := unix.Dup3(int(null.Fd()), 0, 0); err != nil {
		return nil, nil, fmt.Errorf("mcp serve: detach stdin: %w", err)
	}
	if err := unix.Dup3(2, 1, 0); err != nil {
		return nil, nil, fmt.Errorf("mcp serve: detach stdout: %w", err)
	}
	return os.NewFile(uintptr(inFD), "mcp-stdin"), os.NewFile(uintptr(outFD), "mcp-stdout"), nil
}

// lockfilePath is the lockfile calls are checked against, absolute.
func lockfilePath() string {
	p := home.LockfilePath()
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// mcpStatus is `mcp status --json`.
type mcpStatus struct {
	Home     string `json:"home"`
	SetUp    bool   `json:"set_up"`
	Lockfile string `json:"lockfile"`
	Server   string `json:"server"`
	*mcpserve.Catalog
}

func newMCPStatusCmd() *cobra.Command {
	var jsonOut bool
	var pkg string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the tools `mcp serve` exposes, and the installed packages it does not expose with why",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := home.Dir()
			if err != nil {
				return fail(cmd, jsonOut, reason.New(reason.NotSetUp, "%w", err))
			}
			server := "agentnode mcp serve (stdio)"
			var c *mcpserve.Catalog
			if cmd.Flags().Changed("package") {
				if c, err = mcpserve.ScanPackage(dir, pkg); err != nil {
					return fail(cmd, jsonOut, &failure{exit: reason.ExitUsage, err: err})
				}
				server = "agentnode mcp serve --package " + pkg + " (stdio)"
			} else if c, err = mcpserve.Scan(dir); err != nil {
				return fail(cmd, jsonOut, err)
			}
			st := mcpStatus{Home: dir, Lockfile: lockfilePath(), Server: server, Catalog: c}
			_, serr := os.Stat(home.ConfigPath(dir))
			st.SetUp = serr == nil
			if jsonOut {
				if err := writeJSON(cmd.OutOrStdout(), st); err != nil {
					return err
				}
			} else if err := printMCPStatus(cmd.OutOrStdout(), &st, serr); err != nil {
				return err
			}
			if len(c.Problems) > 0 {
				return exitWith(reason.ExitFailed)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	cmd.Flags().StringVar(&pkg, "package", "", "show what `mcp serve --package PKG` exposes")
	return cmd
}

func printMCPStatus(w io.Writer, st *mcpStatus, setupErr error) error {
	if !st.SetUp {
		why := "no config"
		if setupErr != nil && !errors.Is(setupErr, fs.ErrNotExist) {
			why = setupErr.Error()
		}
		fmt.Fprintf(w, "agentnode is not set up (%s): every call would be refused (not_set_up)\n", why)
	}
	fmt.Fprintf(w, "lockfile: %s (AGENTNODE_LOCKFILE or the directory serve starts in)\n", st.Lockfile)
	if len(st.Tools) == 0 {
		fmt.Fprintln(w, "no tools exposed")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MCP TOOL\tPACKAGE\tVERSION\tACTION")
		for _, t := range st.Tools {
			action := t.ActionType
			if action == "" {
				action = "-"
			}
			l := termsafe.Line // from the installed manifests
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l(t.Name), l(t.Package), l(t.Version), l(action))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(st.Skipped) > 0 {
		fmt.Fprintln(w, "\nnot exposed:")
		for _, s := range st.Skipped {
			what := s.Package
			if s.Version != "" {
				what += "@" + s.Version
			}
			if s.Tool != "" {
				what += " tool " + s.Tool
			}
			code := ""
			if s.Code != "" {
				code = " [" + s.Code + "]"
			}
			fmt.Fprintf(w, "  %s: %s%s\n", termsafe.Line(what), termsafe.Line(s.Reason), code)
		}
	}
	if len(st.Problems) > 0 {
		fmt.Fprintln(w, "\nunreadable packages (refused):")
		for _, p := range st.Problems {
			fmt.Fprintf(w, "  %s\n", termsafe.Line(p))
		}
	}
	return nil
}

// httpFlags are the --http flags of `mcp serve`.
type httpFlags struct {
	on          bool // --http was given
	addr        string
	allowRemote bool
	opts        mcpserve.HTTPOptions
}

// serveMCPHTTP listens on web.addr and serves until ctx is done; the bound
// address goes to errw (so --http :0 is usable).
func serveMCPHTTP(ctx context.Context, srv *mcpserve.Server, web *httpFlags, dir string, errw io.Writer) error {
	ln, err := net.Listen("tcp", web.addr)
	if err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	web.opts.AllowRemote = web.allowRemote
	fmt.Fprintf(errw, "agentnode mcp: serving Streamable HTTP at http://%s%s (bearer token in %s)\n",
		ln.Addr(), mcpserve.HTTPPath, mcpserve.TokenPath(dir))
	return srv.RunHTTP(ctx, ln, web.opts)
}

func newMCPTokenCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "token",
		Short: "Print the bearer token of `mcp serve --http` (created at first use, mode 0600 in the home)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := home.Dir()
			if err != nil {
				return fail(cmd, false, reason.New(reason.NotSetUp, "%w", err))
			}
			tok, err := mcpserve.Token(dir)
			if err != nil {
				return fail(cmd, false, usageError("%w", err))
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), tok)
			return err
		},
	}
}
