package dispatch

import (
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/policy"
	"github.com/agentnode/agentnode/kernel/store"
)

// The agent executor and its tests are in executor/agent; here are the
// kernel's parts of an agent run: Guard's decision on its LLM calls and
// the image it is placed with.

func intp(n int) *int { return &n }

// testAgentManifest is an agent that may call e2e-tools, 2 tool calls,
// LLM access on.
func testAgentManifest() *manifest.Manifest {
	return &manifest.Manifest{
		PackageID: "test-agent", PackageType: manifest.TypeAgent, Runtime: manifest.RuntimeExec,
		AgentEntrypoint: "bin/agent",
		ToolAccess:      &manifest.ToolAccess{AllowedPackages: []string{"allowed-tools"}},
		LLMAccess:       &manifest.LLMAccess{Enabled: true},
		Limits:          &manifest.Limits{MaxToolCalls: intp(2)},
	}
}

// agentState is the pipeline's state at the execute stage of an agent run,
// on a real home (config, audit log) after the decision record.
func agentState(t testing.TB, m *manifest.Manifest, edit func(*config.Config)) *state {
	t.Helper()
	dir := t.TempDir()
	path := home.ConfigPath(dir)
	if _, _, err := configedit.Setup(path); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		c, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		edit(c)
		if err := configedit.Save(path, c); err != nil {
			t.Fatal(err)
		}
	}
	set, err := loadSettings(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := &Kernel{HomeDir: dir, StageTimeout: 5 * time.Second}
	// As openAudit opens it: the nested runs append to the same log.
	log, err := audit.Open(home.AuditDir(dir), k.auditOptions(&state{set: set}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	return &state{
		k:   k,
		req: &Request{Package: m.PackageID, Tool: "act"},
		res: &Result{RequestID: audit.NewRequestID(), Decision: "allow", Package: m.PackageID, Version: "0.1.0",
			Tool: "act", Trust: "unknown", Placement: PlacementSandbox, Backend: "libcontainer"},
		set: set,
		pkg: &store.Package{ID: m.PackageID, Version: "0.1.0", Manifest: m},
		log: log,
	}
}

// TestLLMDecision: the opt-in pre-approves credential_use, which lifts the
// default prompt; it never lifts a deny; strict mode, root and the user's
// override behave as everywhere in Guard.
func TestLLMDecision(t *testing.T) {
	cases := []struct {
		name string
		edit func(*config.Config)
		root bool
		want policy.Verdict
		rule policy.Rule
	}{
		{"pre-approved", nil, false, policy.Allow, policy.RulePreApproved},
		{"root escalates", nil, true, policy.Prompt, policy.RulePreApproved},
		{"deny stays", func(c *config.Config) { c.Guard.CredentialUse = config.Deny }, false, policy.Deny, policy.RuleGlobal},
		{"strict ignores it", func(c *config.Config) { c.Guard.Strict = true }, false, policy.Prompt, policy.RuleGlobal},
		{"user override as root", func(c *config.Config) {
			c.Guard.ToolOverrides = map[string]config.ToolOverride{"test-agent/call_llm": {Decision: "allow"}}
		}, true, policy.Allow, policy.RuleOverride},
		{"override of another agent", func(c *config.Config) {
			c.Guard.ToolOverrides = map[string]config.ToolOverride{"other/call_llm": {Decision: "allow"}}
		}, true, policy.Prompt, policy.RulePreApproved},
	}
	for _, c := range cases {
		st := agentState(t, testAgentManifest(), c.edit)
		st.env.Root = c.root
		d := llmDecision(st)
		if d.Verdict != c.want || d.Rule != c.rule {
			t.Errorf("%s: %s by %s (%s), want %s by %s", c.name, d.Verdict, d.Rule, d.Reason(), c.want, c.rule)
		}
	}
}

// TestPythonAgentImage: a python agent is placed in the sandbox with the
// Python image (sandbox.python_image), never the default one; without it
// the run is refused.
func TestPythonAgentImage(t *testing.T) {
	m := testAgentManifest()
	m.Runtime = manifest.RuntimePython
	st := agentState(t, m, nil)
	if _, err := sandboxImage(st); err == nil || !strings.Contains(err.Error(), "sandbox.python_image") {
		t.Fatalf("no python image: %v", err)
	}
	st.set.pythonImage = "agentnode/python@sha256:" + strings.Repeat("1", 64)
	if ref, err := sandboxImage(st); err != nil || ref != st.set.pythonImage {
		t.Fatalf("python image: %q %v", ref, err)
	}
	m.Runtime = manifest.RuntimeExec
	if ref, err := sandboxImage(st); err != nil || ref != st.set.image {
		t.Fatalf("exec agent: %q %v", ref, err)
	}
}

// TestAgentWorkspaceNotGranted: an agent given a workspace does not get it
// itself, whatever its declared filesystem level (its task carries none):
// the record says so, while a toolpack at the same level gets it.
func TestAgentWorkspaceNotGranted(t *testing.T) {
	m := testAgentManifest()
	m.Permissions.Filesystem.Level = "workspace_write"
	st := agentState(t, m, nil)
	st.req.Workspace, st.workspacePath = "/srv/ws", "/srv/ws"
	st.grantWorkspace()
	if g := st.res.Workspace; g == nil || g.Access != WorkspaceNone || !strings.Contains(g.Reason, "agent") {
		t.Fatalf("agent grant %+v, want none", g)
	}
	if p := st.grantedWorkspacePath(); p != "" {
		t.Fatalf("granted path %q, want none", p)
	}
	m.PackageType = manifest.TypeToolpack
	st.res.Workspace = nil
	st.grantWorkspace()
	if g := st.res.Workspace; g == nil || g.Access != WorkspaceReadWrite {
		t.Fatalf("toolpack grant %+v, want read-write", g)
	}
}
