package dispatch

import (
	"strings"

	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
)

// checkHostConfinement refuses a host placement whose confinement the
// host backend cannot give (sandbox_unavailable, with the backend's
// message: Kernel.Executors.Host, the probe and refusal the host backend
// makes again before it starts the tool), so no decision record says allow
// for a run it would refuse. A kernel into which no host backend is wired
// places nothing on the host. A run that will be less than fully confined
// (best_effort) is allowed; its note goes into the warnings and the reason
// of the decision and outcome records.
func checkHostConfinement(st *state) error {
	host, err := st.hostBackend()
	if err != nil {
		return err
	}
	note, err := host.Confinement(st.set.hostConfinement)
	if err != nil {
		return err
	}
	if note != "" {
		st.confineNote = note
		st.k.warn(st, "host tool "+toolName(st)+": "+note)
	}
	return nil
}

// checkHostPython refuses a `runtime: python` tool on the host when the
// host backend could not run its interpreter.
func checkHostPython(st *state) error {
	host, err := st.hostBackend()
	if err != nil {
		return err
	}
	return host.Python()
}

// hostBackend is the host backend's answers (Kernel.Executors.Host):
// sandbox_unavailable when none is wired in.
func (st *state) hostBackend() (plan.Host, error) {
	if st.k.Executors == nil || st.k.Executors.Host == nil {
		return nil, reason.New(reason.SandboxUnavailable, "no host backend is wired into this agentnode")
	}
	return st.k.Executors.Host, nil
}

// toolName is PKG/TOOL for messages.
func toolName(st *state) string {
	var pkg, tool string
	if st.req != nil {
		pkg, tool = st.req.Package, st.req.Tool
	}
	if st.pkg != nil {
		pkg = st.pkg.ID
	}
	if st.tool != nil {
		tool = st.tool.Name
	}
	return pkg + "/" + tool
}

// recordReason is the reason of an audit record: auditReason (the
// refusal's reason and any lockfile warning) and the host confinement
// note, unless the reason already says it.
func (st *state) recordReason() string {
	r := st.auditReason()
	switch {
	case st.confineNote == "" || strings.Contains(r, st.confineNote):
		return r
	case r == "":
		return st.confineNote
	}
	return r + " (" + st.confineNote + ")"
}
