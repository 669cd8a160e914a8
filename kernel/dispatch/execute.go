package dispatch

import (
	"context"

	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
)

// stageExecute hands the decided call to the executor of its package type
// (Kernel.Executors, wired in by cmd/agentnode: the kernel imports no
// executor) as a plan, and takes the outcome back into the result.
func stageExecute(ctx context.Context, st *state) error {
	typ := st.pkg.Manifest.PackageType
	var ex plan.Executor
	if st.k.Executors != nil {
		ex = st.k.Executors.Executors[typ]
	}
	if ex == nil {
		return reason.New(reason.PluginUnavailable, "no executor for %s packages is wired into this agentnode", typ)
	}
	out := &plan.Outcome{}
	err := ex.Execute(ctx, st.plan(), out)
	st.takeOutcome(out)
	return err
}

// plan is what the decision stages decided, for an executor: where it runs
// (the placement; for the sandbox, the backend the placement stage found
// available, its client and the checked image), from which the executor
// builds the backend (executor/backend.For).
func (st *state) plan() *plan.Plan {
	return &plan.Plan{
		RequestID:       st.res.RequestID,
		Package:         st.pkg,
		Tool:            st.tool,
		Input:           st.req.Input,
		Placement:       st.res.Placement,
		BackendName:     st.res.Backend,
		Runtime:         st.res.Runtime,
		Sandbox:         st.sandbox,
		Limits:          st.set.limits,
		Timeout:         st.set.timeout,
		Environ:         st.k.Environ,
		HostConfinement: st.set.hostConfinement,
		Trust:           st.res.Trust,
		Workspace:       st.workspace(),
		Agent: plan.AgentSettings{SandboxEnabled: st.set.agentSandboxEnabled, LLM: st.set.agentLLM,
			Providers: st.set.llmProviders},
		Services: &services{st: st},
		MCP:      st.mcp,
		Image:    st.image(),
		Plugins:  st.k.Plugins,
	}
}

// takeOutcome fills the result from an executor's outcome. Placement said
// how a host run would be confined (and warned); the host backend checked
// again and says how it was: its word goes into the outcome record.
func (st *state) takeOutcome(out *plan.Outcome) {
	r := st.res
	r.Ran, r.ExitCode, r.OK, r.Output, r.Error, r.Stderr, r.DurationMS =
		out.Ran, out.ExitCode, out.OK, out.Output, out.Error, out.Stderr, out.DurationMS
	for _, w := range out.Warnings {
		st.k.warn(st, w)
	}
	if !out.Ran || st.res.Placement != PlacementHost {
		return
	}
	if out.Confinement != st.confineNote {
		st.confineNote = out.Confinement
		if out.Confinement != "" {
			st.k.warn(st, "host tool "+st.pkg.ID+"/"+st.tool.Name+": "+out.Confinement)
		}
	}
	if out.Confinement != "" && r.Reason == "" {
		r.Reason = out.Confinement
	}
}

// image is the sandbox image the placement checked (zero on the host).
func (st *state) image() plan.Image {
	if st.img == nil {
		return plan.Image{}
	}
	return plan.Image{Ref: st.img.Ref, Store: st.img.Store, ConfigDigest: st.img.ConfigDigest}
}
