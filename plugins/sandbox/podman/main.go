// Command agentnode-sandbox-podman is the bundled Podman sandbox backend. It
// runs one tool process per run in a hardened container by driving the
// daemonless podman CLI with os/exec (never a shell): the container's
// options come from the shared profile (sdk/sandbox/profile) mapped onto
// podman's flags, the seccomp filter is the profile's own
// (profile.SeccompDockerJSON), and the image is addressed by its ID (the
// config digest), so the digest that was checked is the one that runs.
//
// Each run is `podman run --rm` with the tool's stdin, stdout and stderr
// passed straight through (--log-driver passthrough); it is killed on
// timeout, cancellation or an output failure (`podman kill -s KILL`, then
// the podman process group), always removed, and its removal proven before
// CleanupVerified is reported: no container with its ID, name or labels in
// podman's state (libpod's database and containers/storage's lists, read
// directly; see state.go), no cgroup directory of it in any hierarchy, no
// mount and no storage directory that names it. The tool's exit status is
// the one libpod recorded for the container, which tells it apart from
// podman's own failures (125-127). Each run's container gets a cgroup
// parent of its own, which carries the memory limits on cgroup v1 and
// tells an OOM kill from any other SIGKILL after --rm removed the
// container (runcgroup.go); it is removed, and proven gone, with the
// container. Whatever is not proven that way (podman
// killed, a leftover, a database this plugin cannot read) is removed with
// `podman rm -f -t 0` and proven with `podman ps`; where podman's state
// cannot be read at all, runs keep their container (--rm=false) for
// `podman container inspect` and removal, as before.
//
// podman runs as root with `--runtime <abs runc> --cgroup-manager cgroupfs`
// and a containers.conf of this plugin's own (CONTAINERS_CONF), so the host's
// containers.conf cannot add volumes, devices, hooks or environment to the
// sandbox. Rootless podman is refused: on cgroup v1 it ignores the memory
// and pids limits. Like every bundled plugin it imports only sdk/ (plus
// third-party modules), and it gives podman an explicit environment with
// nothing of its own.
package main

import (
	"context"
	"os"
	"time"

	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// info describes this plugin to the host.
func info() plugin.Info {
	return plugin.Info{Name: "podman", Kind: plugin.KindSandbox, Version: version}
}

func main() {
	logger := plugin.NewLogger("podman")
	b := newBackend(logger)
	started := os.Getenv(plugin.Handshake.MagicCookieKey) == plugin.Handshake.MagicCookieValue
	go func() {
		if !started {
			return // run by hand: Serve refuses and exits
		}
		// Containers of an earlier plugin process that died mid-run: no
		// one enforces their timeout any more.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := b.reapOrphans(ctx); err != nil {
			logger.Error("orphaned containers left behind", "error", err)
		}
	}()
	sandbox.Serve(info(), b)
	// The host closed the connection, which cancelled any run in progress:
	// let those kill and remove their containers before exiting.
	if !b.drain(drainTimeout) {
		logger.Error("exiting with runs still cleaning up; their containers are removed when the plugin next starts")
	}
}

// drainTimeout bounds how long the plugin waits for runs to clean up after
// the host closed it (go-plugin kills it after two seconds anyway).
const drainTimeout = 10 * time.Second
