// Command agentnode-sandbox-kubernetes is the Kubernetes sandbox backend: it
// runs one tool process per run in a Pod of its own, in the cluster and
// namespace its configuration names, while decisions, Guard and audit stay
// on the host that asks. It sits in plugins/ and imports only sdk/ (and
// client-go), like every backend.
//
// Each run: the package the host verified is copied into an immutable
// ConfigMap (binaryData, bounded size) and projected read-only at /pack; the
// Pod (PodFor: the shared profile's user, read-only root, no capabilities,
// no privilege escalation, seccomp, limits, tmpfs emptyDirs, no service
// account token, no service links, the image by digest, never pulled) first
// runs an init container that checks every file of /pack against the
// SHA-256 digests the pod spec carries, so the tool never starts on a
// package the kernel did not verify. The tool waits for one newline on
// stdin (the start gate, so no output is lost before attach), then its
// stdin, stdout and stderr travel over the attach subresource. The timeout
// is enforced by the plugin (and, should it die, by the pod's
// activeDeadlineSeconds). Whatever happened, the Pod and the ConfigMap are
// deleted with grace 0 and the API must answer NotFound for both before Run
// reports CleanupVerified. Pods and ConfigMaps carry an owner label of this
// host and a process label of this plugin process; at start the plugin
// deletes those whose owning process is dead (orphans).
//
// Configuration: a JSON file next to the binary, <binary>.json (see
// config.go and specs/sandbox/README.md): plugins are started without the
// host's environment and the kernel passes no backend settings, so the
// cluster is named there. The kubeconfig's credentials are read by this
// process only; they never reach a pod, the audit or a log.
package main

import (
	"context"
	"io"
	"os"
	"time"

	"k8s.io/klog/v2"

	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// reapTimeout bounds the start-up sweep for orphaned pods.
const reapTimeout = 2 * time.Minute

// info describes this plugin to the host.
func info() plugin.Info {
	return plugin.Info{Name: "kubernetes", Kind: plugin.KindSandbox, Version: version}
}

func main() {
	logger := plugin.NewLogger("kubernetes")
	// client-go logs through klog straight to stderr (stream errors after
	// a kill, for one): off, the backend reports what matters itself.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	cfg, cfgErr := configFor(executable())
	if cfgErr != nil {
		logger.Error("configuration", "error", cfgErr)
	}
	b := newBackend(logger, cfg, cfgErr)
	byHost := os.Getenv(plugin.Handshake.MagicCookieKey) == plugin.Handshake.MagicCookieValue
	if cfgErr == nil && byHost {
		go func() {
			// Pods of an earlier plugin process that died mid-run.
			ctx, cancel := context.WithTimeout(context.Background(), reapTimeout)
			defer cancel()
			if n, err := b.reapOrphans(ctx); err != nil {
				logger.Warn("orphaned pods not swept", "error", err, "removed", n)
			} else if n > 0 {
				logger.Warn("removed pods orphaned by a dead plugin process", "removed", n)
			}
		}()
	}
	sandbox.Serve(info(), b)
}

// executable is this binary's path, symlinks resolved; "" if unknown.
func executable() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return exe
}
