// Command agentnode-sandbox-docker is the Docker sandbox backend: it runs one
// tool process per run in a fresh container of the Docker Engine, through
// the Engine API (github.com/moby/moby/client), hardened exactly as the
// shared profile says (sdk/sandbox/profile).
//
// Each run creates a container from the image ID the host verified (the
// config digest, never a name or tag, never pulled), named agentnode-<RunID>
// and labelled agentnode.run=<RunID>, with the profile mapped onto the API:
// uid:gid 1000:1000, a read-only root, every capability dropped,
// no-new-privileges, the sandbox's own seccomp profile, network none,
// private ipc and cgroup namespaces, tmpfs /tmp and HOME with the profile's
// options, the package as a non-recursive read-only bind at /pack, the
// memory (= memory+swap), pids and CPU limits, the rlimits as ulimits, the
// profile's masked and read-only paths, no init, no log driver. Before the
// start, the container's stored configuration is inspected and compared
// with what was asked; any difference refuses the run. Stdin, stdout and
// stderr travel over one attach stream. On timeout, cancellation or a host
// that stops taking output the container gets SIGKILL. Whatever happened,
// it is then removed by force and proven gone: inspect by id and by name
// both answer "no such container", no container carries the run's label,
// and no mount or cgroup of it is left on the host. Only then does the run
// report CleanupVerified. Before the start the run is armed with the
// plugin's reaper (sdk/sandbox/reaper, this binary re-executed), which kills
// and removes the container should the plugin die mid-run, and kills it
// one second past its deadline should the plugin hang.
//
// # Which engine
//
// Plugins are started without the host's environment, so DOCKER_HOST does
// not reach this one. It talks to unix:///var/run/docker.sock unless a host
// file sits next to its binary (os.Executable, symlinks resolved):
// <binary>.docker-host (for example
// bin/agentnode-sandbox-docker.docker-host) holding one line
// unix:///absolute/path/to/docker.sock ('#' comments and blank lines
// allowed). The file must be a regular file, owned by root or by the user
// the plugin runs as, and not writable by group or others; only unix
// sockets are accepted (the engine API is root-equivalent, so no plain
// TCP). A host file that breaks these rules makes every call fail; it is
// never ignored in favour of the default. See README.md.
//
// Like every bundled plugin it imports only sdk/ (plus third-party
// modules), and it logs with hclog to stderr only.
package main

import (
	"context"
	"os"
	"time"

	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/reaper"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// reapTimeout bounds the start-up sweep for orphaned containers.
const reapTimeout = 2 * time.Minute

// info describes this plugin to the host.
func info() plugin.Info {
	return plugin.Info{Name: "docker", Kind: plugin.KindSandbox, Version: version}
}

// init makes a re-execution of this binary as the plugin's reaper
// (sdk/sandbox/reaper) the reaper, and never returns then; test binaries of
// this package included.
func init() {
	reaper.Serve(reapRun)
}

func main() {
	logger := plugin.NewLogger("docker")
	exe, err := os.Executable()
	if err != nil {
		logger.Warn("cannot locate the plugin binary; using the default engine socket", "error", err)
		exe = ""
	}
	ep, epErr := endpointFor(exe)
	if epErr != nil {
		logger.Error("engine endpoint", "error", epErr)
	}
	b := newBackend(logger, ep, epErr)
	// Only when started by agentnode (Serve refuses anything else).
	byHost := os.Getenv(plugin.Handshake.MagicCookieKey) == plugin.Handshake.MagicCookieValue
	if epErr == nil && byHost {
		go func() {
			// The reaper, before the first run needs it.
			if err := b.reaper.Start(); err != nil {
				logger.Error("reaper not started", "error", err)
			}
		}()
		go func() {
			// Containers of an earlier plugin process that died mid-run.
			ctx, cancel := context.WithTimeout(context.Background(), reapTimeout)
			defer cancel()
			if n, err := b.reapOrphans(ctx); err != nil {
				logger.Debug("orphaned containers not swept", "error", err, "removed", n)
			} else if n > 0 {
				logger.Warn("removed containers orphaned by a dead plugin process", "removed", n)
			}
		}()
	}
	sandbox.Serve(info(), b)
}
