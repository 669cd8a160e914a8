// Package backend holds the backends a plan runs on (kernel/plan.Backend):
// the host, where a trusted tool runs confined (Host, over
// executor/hostexec: Landlock and seccomp), and the sandbox backend plugins
// (Sandbox, over sdk/sandbox: libcontainer, Docker, Podman). Both take the
// same Task, so an executor says what to run and the placement where: the
// host is one more backend, the way Nomad's raw_exec is one more driver.
package backend

import (
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// For is the backend of a placement: the host, or the sandbox backend
// plugin name (its client sb, checked available by the placement stage)
// running image img.
func For(placement, name string, sb *sandbox.Client, img plan.Image) (plan.Backend, error) {
	switch placement {
	case plan.PlacementHost:
		return Host{}, nil
	case plan.PlacementSandbox:
		if sb == nil {
			return nil, reason.New(reason.SandboxUnavailable, "no sandbox backend was placed")
		}
		return &Sandbox{Name: name, Client: sb, Image: img}, nil
	}
	return nil, reason.New(reason.SandboxUnavailable, "placement %q cannot execute", placement)
}
