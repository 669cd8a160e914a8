// Command agentnode-sandbox-libcontainer is the bundled, default sandbox
// backend. It runs one tool process per run inside a hardened container
// built directly with runc's libcontainer (no daemon, no runc binary): the
// OCI spec comes from the shared profile (sdk/sandbox/profile), is turned
// into a libcontainer config by specconv, and every run is destroyed
// afterwards and its cleanup proven (state directory, cgroups in every
// hierarchy, mounts). A run asking for gVisor (Spec.Runtime gvisor) gets the
// same profile as an OCI bundle handed to /usr/bin/runsc (gvisor.go).
//
// The binary has two personalities. Started by the host it is a go-plugin
// sandbox plugin (sandbox.Serve). Re-executed by libcontainer as
// "<argv0> init" (through a sealed copy of /proc/self/exe) it is the
// container's bootstrap process: the nsenter constructor (C, before the Go
// runtime starts) joins and creates the namespaces, and init below hands
// over to libcontainer.Init, which sets the container up and execs the tool.
// That path never reaches plugin code and never returns. Re-executed as
// "<argv0> agentnode-sandbox-reaper" it is the plugin's reaper
// (sdk/sandbox/reaper), which kills and destroys a run's container should
// the plugin die mid-run or hang past the run's deadline.
//
// It must be built with cgo and -tags seccomp. Run by root it maps each
// sandbox into agentnode's subordinate ids (userns.go); run by a normal user
// it runs rootless in that user's own subordinate ids and delegated cgroup
// subtree (rootless.go). Like every
// bundled plugin it imports only sdk/ (plus third-party modules).
package main

import (
	"os"
	"runtime"

	"github.com/opencontainers/runc/libcontainer"
	// nsexec: the C constructor that runs before the Go runtime in the
	// re-executed init and sets up namespaces for it.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"

	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/reaper"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// initArg is the argument libcontainer (v1.5) re-executes this binary with.
const initArg = "init"

// init runs before main and before any test: when this process is the
// container bootstrap, libcontainer takes over for good. Being in init (not
// main) also makes `go test` binaries of this package valid container inits,
// which the in-process tests and benchmarks rely on.
//
// Otherwise it pins the main goroutine to the main thread for the life of
// the process. libcontainer runs helper goroutines that lock their thread,
// setns(2) into the container's mount namespace and exit locked, relying on
// the runtime to kill the thread. The runtime cannot kill the main thread:
// it parks it for good instead, still inside that container's mount
// namespace, which then outlives the container (its mounts stay referenced)
// and becomes what /proc/self/{mountinfo,root} show for this process. With
// the main thread reserved for the main goroutine no such helper can ever
// run on it.
func init() {
	if len(os.Args) > 1 && os.Args[1] == initArg {
		libcontainer.Init() // never returns: execs the tool or exits 255
		os.Exit(255)
	}
	runtime.LockOSThread()
	// Re-executed as this plugin's reaper (sdk/sandbox/reaper): never
	// returns then.
	reaper.Serve(reapRun)
}

// info describes this plugin to the host.
func info() plugin.Info {
	return plugin.Info{Name: "libcontainer", Kind: plugin.KindSandbox, Version: version}
}

func main() {
	logger := plugin.NewLogger("libcontainer")
	routeLogrus(logger)
	b := newBackend(logger)
	// The host starts this plugin when it is about to run something.
	b.warmCgroupLock()
	go func() {
		// The reaper, before the first run needs it.
		if err := b.reaper.Start(); err != nil {
			logger.Error("reaper not started", "error", err)
		}
	}()
	go func() {
		// Containers of an earlier plugin process that died mid-run.
		if _, err := b.reapOrphans(); err != nil {
			logger.Error("orphaned containers left behind", "error", err)
		}
		if err := b.reapOrphanRoots(); err != nil {
			logger.Error("orphaned run roots left behind", "error", err)
		}
	}()
	sandbox.Serve(info(), b)
	// The host stopped this plugin: no prepared container outlives it
	// (should it die instead, the reaper destroys them).
	b.pool.closePool(b)
}
