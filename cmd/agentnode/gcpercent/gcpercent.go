// Package gcpercent sets the garbage collector's target of an agentnode
// command (GOGC=Command unless the user set GOGC) from an init function,
// so that it holds before the heavy initialization of the packages the
// command imports, not from main, which runs after all of it.
//
// An agentnode command is a short-lived process with a heap of a few
// megabytes, and collecting at 400% instead of 100% of the live heap spares
// it the collections that otherwise compete with its plugins' start-up for
// the CPU. Package initialization alone allocates about 3.3 MB (1.7 MB of
// it github.com/santhosh-tekuri/jsonschema/v6 compiling its meta-schemas),
// which with the default target started a collection in most runs before
// main was reached: `agentnode version` took 29.2 ms of CPU (median of 60)
// with the target set in main, 21.8 ms with it set before initialization.
//
// Go initializes packages in import-path order, each once all its imports
// are (the Go spec, "Package initialization"); this package imports only
// os and runtime/debug, which are ready long before jsonschema's
// dependencies, so it runs first. It lives apart so that it stays that
// small: cmd/agentnode imports it, and runtrace reads Start.
package gcpercent

import (
	"os"
	"runtime/debug"
	"time"
)

// Start is when this process's package initialization began (this package
// initializes first): the origin of `agentnode run --trace`
// (cmd/agentnode/runtrace). Only the Go runtime's own start comes before it.
var Start = time.Now()

// Command is the target (GOGC) of an agentnode command. `mcp serve`, which
// runs for long, goes back to the default (cmd/agentnode's useDefaultGC).
const Command = 400

func init() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(Command)
	}
}
