package policy

import (
	"strings"
	"testing"
)

// TestPromptCeiling: a declared level above Input.PromptCeiling raises an
// allow to prompt (the AgentNode SDK's permissions.* prompt/sandboxed); at
// or below it nothing changes, a deny stays a deny and a tool override,
// the user's own decision for that tool, stands.
func TestPromptCeiling(t *testing.T) {
	base := Input{Package: "acme-pack", Tool: "fetch_page", Actions: []Action{Read}, TrustLevel: "verified",
		PromptCeiling: Permissions{Network: "restricted", Filesystem: "workspace_read", CodeExecution: "limited_subprocess"}}
	for _, tc := range []struct {
		name  string
		perms Permissions
		want  Verdict
		kind  string
	}{
		{"all none", Permissions{"none", "none", "none"}, Allow, ""},
		{"at the ceiling", Permissions{"restricted", "workspace_read", "limited_subprocess"}, Allow, ""},
		{"network above", Permissions{"unrestricted", "none", "none"}, Prompt, "network"},
		{"filesystem above", Permissions{"none", "workspace_write", "none"}, Prompt, "filesystem"},
		{"shell", Permissions{"none", "none", "shell"}, Prompt, "code_execution"},
		{"unknown level", Permissions{"everywhere", "none", "none"}, Prompt, "network"},
	} {
		in := base
		in.Permissions = tc.perms
		d := Decide(in)
		if d.Verdict != tc.want || d.PermissionKind() != tc.kind {
			t.Errorf("%s: %s (%s), want %s (%s): %s", tc.name, d.Verdict, d.PermissionKind(), tc.want, tc.kind, d.Reason())
		}
		if tc.want == Prompt && (d.Escalation != EscalationPermission || !strings.Contains(d.Reason(), "permissions."+tc.kind)) {
			t.Errorf("%s: escalation %q, reason %q", tc.name, d.Escalation, d.Reason())
		}
	}
	in := base
	in.Permissions = Permissions{"unrestricted", "none", "none"}
	in.Global = map[Action]Verdict{Read: Deny}
	if d := Decide(in); d.Verdict != Deny {
		t.Errorf("a deny became %s", d.Verdict)
	}
	in.Global = nil
	in.Overrides = map[string]Verdict{"acme-pack/fetch_page": Allow}
	if d := Decide(in); d.Verdict != Allow || d.Rule != RuleOverride {
		t.Errorf("tool override: %s by %s", d.Verdict, d.Rule)
	}
	in.Overrides = nil
	in.Strict = true
	if d := Decide(in); d.Verdict != Prompt {
		t.Errorf("strict mode lost the prompt: %s", d.Verdict)
	}
}
