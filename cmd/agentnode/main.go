// Command agentnode is the CLI of agentnode: it parses arguments, calls the
// kernel and prints. See specs/cli.md for the commands, exit codes and
// reason codes it implements.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	_ "github.com/agentnode/agentnode/cmd/agentnode/gcpercent" // GOGC before the other packages' init
	"github.com/agentnode/agentnode/cmd/agentnode/termsafe"
	"github.com/agentnode/agentnode/kernel/reason"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// commands is filled by init functions of the files in this package, one file
// per command group.
var commands []func() *cobra.Command

func register(f func() *cobra.Command) { commands = append(commands, f) }

func main() {
	os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// useDefaultGC restores the garbage collector's default (GOGC=100) in a
// long-running command, unless the user set GOGC.
func useDefaultGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(100)
	}
}

// execute runs the CLI and returns the process exit code. Everything the
// commands print goes through termsafe: control characters, C1 and bidi
// controls and invalid UTF-8 in what tools, manifests, plugins or audit
// records said are escaped, never passed to the terminal (mcp serve's
// protocol stream is the exception: mcpStdio unwraps it).
func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	stdout, stderr = termsafe.NewWriter(stdout), termsafe.NewWriter(stderr)
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return reason.ExitOK
	}
	var f *failure
	if errors.As(err, &f) {
		if !f.printed {
			fmt.Fprintf(stderr, "agentnode: %s\n", termsafe.Text(f.err.Error()))
		}
		return f.exit
	}
	// cobra's own errors: unknown command, bad flag, wrong arg count.
	fmt.Fprintf(stderr, "agentnode: %v\n", err)
	return reason.ExitUsage
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "agentnode",
		Short:         "Run third-party AI-agent tools without handing them your privileges",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	for _, f := range commands {
		root.AddCommand(f())
	}
	return root
}

// failure is what a command's RunE returns to set the exit code. printed
// means the command already told the user.
type failure struct {
	exit    int
	err     error
	printed bool
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// usageError is an exit-2 error with a message naming what is wrong.
func usageError(format string, args ...any) error {
	return &failure{exit: reason.ExitUsage, err: fmt.Errorf(format, args...)}
}

// exitWith returns a failure with an explicit exit code and no message.
func exitWith(code int) error {
	return &failure{exit: code, err: fmt.Errorf("exit %d", code), printed: true}
}
