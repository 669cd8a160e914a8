package dispatch

import (
	"strings"

	"github.com/agentnode/agentnode/kernel/hostexec"
)

// probeHostConfinement assesses sandbox.host_confinement on this kernel:
// hostexec.CheckConfinement, the same probe (kernel/confine, cached per
// process) and the same refusal the host executor makes again before it
// starts the tool. Tests replace it; nothing else does.
var probeHostConfinement = hostexec.CheckConfinement

// checkHostConfinement refuses a host placement whose confinement the
// kernel cannot give (sandbox_unavailable, with the executor's message),
// so no decision record says allow for a run the executor would refuse.
// A run that will be less than fully confined (best_effort) is allowed;
// its note goes into the warnings and the reason of the decision and
// outcome records.
func checkHostConfinement(st *state) error {
	assessed, err := probeHostConfinement(st.set.hostConfinement)
	if err != nil {
		return err
	}
	if assessed.Note != "" {
		st.confineNote = assessed.Note
		st.k.warn(st, "host tool "+toolName(st)+": "+assessed.Note)
	}
	return nil
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
