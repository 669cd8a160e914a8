package hostexec

import (
	"github.com/agentnode/agentnode/kernel/confine"
	"github.com/agentnode/agentnode/kernel/reason"
)

// Confinement asks Run to confine the tool with capabilities dropped,
// Landlock and seccomp (kernel/confine has the policy): it may read its
// package, read and write its work directory, read the system's software,
// and nothing else; without Network it cannot create sockets.
type Confinement struct {
	// Mode is sandbox.host_confinement: confine.ModeRequired refuses with
	// sandbox_unavailable when the kernel lacks Landlock ABI
	// confine.MinABI; confine.ModeBestEffort runs with what the kernel
	// has and says so in Result.Confinement.
	Mode string
	// Network: the manifest declares network (restricted or
	// unrestricted), so the tool may use inet sockets.
	Network bool
}

// landlockABI reports the kernel's Landlock ABI. Tests replace it to reach
// the modes' fallbacks on a kernel that has Landlock; nothing else does.
var landlockABI = confine.LandlockABI

// confinePlan is a Confinement checked against the kernel, for one run.
type confinePlan struct {
	network  bool
	assessed confine.Assessment
}

// planConfinement decides how the run is confined before anything is
// created; a required confinement the kernel cannot give is
// sandbox_unavailable.
func planConfinement(c *Confinement) (*confinePlan, error) {
	assessed, err := confine.Assess(c.Mode, landlockABI())
	if err != nil {
		return nil, reason.New(reason.SandboxUnavailable, "hostexec: %w", err)
	}
	return &confinePlan{network: c.Network, assessed: assessed}, nil
}

// policy is the confinement of a run in packDir with work dir work.
func (p *confinePlan) policy(packDir, work string) *confine.Policy {
	return &confine.Policy{PackageDir: packDir, WorkDir: work, Network: p.network, Landlock: p.assessed.Landlock}
}

// note is Result.Confinement.
func (p *confinePlan) note() string {
	if p == nil {
		return "unconfined: not requested"
	}
	return p.assessed.Note
}
