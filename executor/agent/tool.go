package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/reason"
)

// runTool answers a run_tool request. A package outside the manifest's
// tool_access.allowed_packages, or a call over limits.max_tool_calls, is
// refused here, before anything of the target is loaded; the refusal is
// answered and audited (event agent_tool_call). An allowed call is a full
// nested pipeline run (*Kernel).Run of its own, with its own decision and
// outcome records, trust, placement and Guard; an agent_tool_call record
// in the agent's request links the two. The nested run knows the calling
// agent: its guard.agent_overrides entry pre-approves action types there.
func (s *agentSession) runTool(ctx context.Context, msg *agentMsg) agentReply {
	target := msg.Package + "/" + msg.Tool
	if msg.Tool == "" {
		target = msg.Package
	}
	agentID := s.p.Package.ID
	if !slices.Contains(s.lim.allowedPackages, msg.Package) {
		why := fmt.Sprintf("run_tool %s: package %s is not in tool_access.allowed_packages of agent %s", target, msg.Package, agentID)
		if len(s.lim.allowedPackages) == 0 {
			why = fmt.Sprintf("run_tool %s: agent %s lists no tool_access.allowed_packages, so it may call no tools", target, agentID)
		}
		return s.refuseTool(reason.PolicyDenied, why)
	}
	if s.toolCalls >= s.lim.maxToolCalls {
		return s.refuseTool(reason.RateLimited, fmt.Sprintf("run_tool %s: agent %s used its %d tool calls (limits.max_tool_calls)",
			target, agentID, s.lim.maxToolCalls))
	}
	tool := msg.Tool
	if tool == "" {
		var err error
		if tool, err = s.defaultTool(msg.Package); err != nil {
			return s.refuseTool(reason.CodeOf(err), fmt.Sprintf("run_tool %s: %v", target, err))
		}
		target += "/" + tool
	}
	s.toolCalls++
	res, err := s.p.Services.RunTool(ctx, msg.Package, tool, msg.Input)
	rec := s.record("agent_tool_call", "run_tool")
	rec.Decision = res.Decision
	rec.Code = res.Code
	rec.Reason = truncate(fmt.Sprintf("run_tool %s (call %d of %d): request %s", target, s.toolCalls, s.lim.maxToolCalls, res.RequestID), 512)
	if aerr := s.append(rec); aerr != nil {
		return agentReply{Code: string(reason.AuditUnavailable), Error: "the agent's audit record could not be written"}
	}
	switch {
	case err != nil:
		// Refused (or failed in the pipeline): the nested run audited it.
		return agentReply{OK: false, Code: string(reason.CodeOf(err)), Error: err.Error()}
	case res.OK != nil && *res.OK:
		return agentReply{OK: true, Result: res.Output}
	}
	why := res.Error
	if why == "" {
		why = "the tool failed"
	}
	return agentReply{OK: false, Error: why}
}

// defaultTool is the tool a run_tool without one calls, as AgentNode's SDK
// resolves run_tool(slug) (its package-level entrypoint): the package's
// only tool, or else the one tool that uses the package-level
// entrypoint (taken from it, or "module:run" for entrypoint "module"). Anything else is refused (policy_denied): the agent must
// name the tool. Only the installed manifest is read; the nested run
// verifies the package as always.
func (s *agentSession) defaultTool(pkgID string) (string, error) {
	pkg, err := s.p.Services.Installed(pkgID)
	if err != nil {
		if reason.CodeOf(err) != "" {
			return "", err
		}
		return "", reason.New(reason.ArtifactMismatch, "%w", err)
	}
	tools := pkg.Manifest.Tools
	if len(tools) == 1 {
		return tools[0].Name, nil
	}
	pkgEP := pkg.Manifest.Entrypoint
	if pkgEP != "" && !strings.Contains(pkgEP, ":") {
		pkgEP += ":run"
	}
	var names, fromPackage []string
	for _, t := range tools {
		names = append(names, t.Name)
		if t.FromPackage || (pkgEP != "" && t.Entrypoint == pkgEP) {
			fromPackage = append(fromPackage, t.Name)
		}
	}
	if len(fromPackage) == 1 {
		return fromPackage[0], nil
	}
	return "", reason.New(reason.PolicyDenied, "package %s has %d tools (%s) and the request names none",
		pkgID, len(tools), strings.Join(names, ", "))
}

// refuseTool audits and answers a run_tool refusal.
func (s *agentSession) refuseTool(code reason.Code, why string) agentReply {
	rec := s.record("agent_tool_call", "run_tool")
	rec.Decision, rec.Code, rec.Reason = "deny", string(code), truncate(why, 512)
	if err := s.append(rec); err != nil {
		return agentReply{Code: string(reason.AuditUnavailable), Error: "the agent's audit record could not be written"}
	}
	return s.refuse(code, why)
}

// record is an audit record of the agent's run (its request id, package,
// trust, placement) for one of the agent's requests: verb is the tool.
func (s *agentSession) record(event, verb string) *audit.Record {
	return s.p.Services.Record(event, verb)
}

// append writes rec durably; a failure ends the session (fail closed: no
// request is answered without its record).
func (s *agentSession) append(rec *audit.Record) error {
	if err := s.p.Services.Append(rec); err != nil {
		s.fatalErr = reason.Wrap(reason.AuditUnavailable, err, "write agent request record")
		return s.fatalErr
	}
	return nil
}
