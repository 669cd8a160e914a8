package hostexec

import (
	"github.com/agentnode/agentnode/executor/confine"
	"github.com/agentnode/agentnode/kernel/reason"
)

// Confinement asks Run to confine the tool with capabilities dropped,
// Landlock and seccomp (executor/confine has the policy): it may read its
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

// readiness reports what the kernel and this build can do (confine.Probe,
// cached per process). Tests replace it to reach the modes' fallbacks on a
// kernel that has Landlock; nothing else does.
var readiness = confine.Probe

// ConfinementReadiness reports what this kernel and build can do to
// confine a host tool: the probe Run checks every confined run against.
func ConfinementReadiness() confine.Readiness { return readiness() }

// CheckConfinement decides how a tool run under sandbox.host_confinement
// mode would be confined on this kernel, without running anything: the
// check Run makes before it starts a confined tool, for callers that must
// refuse before they decide (kernel/dispatch's placement). It is
// AssessConfinement of ConfinementReadiness.
func CheckConfinement(mode string) (confine.Assessment, error) {
	return AssessConfinement(readiness(), mode)
}

// AssessConfinement decides how a tool run under mode is confined with
// what r says the kernel and build can do. A confinement they cannot give
// (mode required without Landlock ABI confine.MinABI; no seccomp, in any
// mode; an unknown mode) is an error with the reason code
// sandbox_unavailable wrapping confine.ErrUnavailable; otherwise the
// Assessment's Note is empty for full confinement, else the note for the
// audit record.
func AssessConfinement(r confine.Readiness, mode string) (confine.Assessment, error) {
	assessed, err := r.Assess(mode)
	if err != nil {
		return confine.Assessment{}, reason.New(reason.SandboxUnavailable, "%w", err)
	}
	return assessed, nil
}

// confinePlan is a Confinement checked against the kernel, for one run.
type confinePlan struct {
	network  bool
	assessed confine.Assessment
}

// planConfinement decides how the run is confined before anything is
// created (CheckConfinement).
func planConfinement(c *Confinement) (*confinePlan, error) {
	assessed, err := CheckConfinement(c.Mode)
	if err != nil {
		return nil, err
	}
	return &confinePlan{network: c.Network, assessed: assessed}, nil
}

// policy is the confinement of a run in packDir with work dir work and
// workspace ws (nil: none).
func (p *confinePlan) policy(packDir, work string, ws *Workspace) *confine.Policy {
	pol := &confine.Policy{PackageDir: packDir, WorkDir: work, Network: p.network, Landlock: p.assessed.Landlock}
	if ws != nil {
		pol.Workspace, pol.WorkspaceWritable = ws.Path, ws.Writable
	}
	return pol
}

// note is Result.Confinement.
func (p *confinePlan) note() string {
	if p == nil {
		return "unconfined: not requested"
	}
	return p.assessed.Note
}
