package policy

import (
	"strings"
	"testing"
)

// The AgentNode SDK's object form of guard.tool_overrides: each action type
// of the call with an entry takes it; the others follow the policy, and
// the strictest verdict over all of them wins.
func TestActionOverrides(t *testing.T) {
	per := func(m map[Action]Verdict) map[string]map[Action]Verdict {
		return map[string]map[Action]Verdict{"p/t": m}
	}
	critical := []Action{Delete, Execute, WriteExternal, CredentialUse} // 80 when unverified
	cases := []struct {
		name   string
		in     Input
		want   Verdict
		rule   Rule
		action Action
		reason string
	}{
		{"an overridden action type takes its verdict",
			Input{Actions: []Action{Delete}, ActionOverrides: per(map[Action]Verdict{Delete: Allow})},
			Allow, RuleOverride, "", "tool override p/t: allow"},
		{"an action type without an entry follows the policy",
			Input{Actions: []Action{Delete, NetworkEgress}, ActionOverrides: per(map[Action]Verdict{NetworkEgress: Allow})},
			Prompt, RuleGlobal, Delete, "default policy: delete → prompt"},
		{"allowing one action type leaves the others' prompt",
			Input{Actions: []Action{Delete, Execute}, ActionOverrides: per(map[Action]Verdict{Delete: Allow})},
			Prompt, RuleGlobal, Execute, "execute → prompt"},
		{"a deny for one action type denies the call",
			Input{Actions: []Action{Read, NetworkEgress}, ActionOverrides: per(map[Action]Verdict{NetworkEgress: Deny})},
			Deny, RuleOverride, NetworkEgress, "tool override p/t for network_egress: deny"},
		{"a prompt for an action type the policy allows",
			Input{Actions: []Action{Read}, ActionOverrides: per(map[Action]Verdict{Read: Prompt})},
			Prompt, RuleOverride, Read, "tool override p/t for read: prompt"},
		{"an entry for an action type the call does not have changes nothing",
			Input{Actions: []Action{Delete}, ActionOverrides: per(map[Action]Verdict{Read: Deny, Execute: Allow})},
			Prompt, RuleGlobal, Delete, "default policy"},
		{"an empty object changes nothing",
			Input{Actions: []Action{Delete}, ActionOverrides: per(map[Action]Verdict{})},
			Prompt, RuleGlobal, Delete, "default policy"},
		{"an overridden allow beats the global deny",
			Input{Actions: []Action{Read}, Global: map[Action]Verdict{Read: Deny}, ActionOverrides: per(map[Action]Verdict{Read: Allow})},
			Allow, RuleOverride, "", "tool override p/t: allow"},
		{"the global deny of an action type without an entry stays",
			Input{Actions: []Action{Read, NetworkEgress}, Global: map[Action]Verdict{NetworkEgress: Deny},
				ActionOverrides: per(map[Action]Verdict{Read: Allow})},
			Deny, RuleGlobal, NetworkEgress, "default policy: network_egress → deny"},
		{"an overridden prompt is not lifted by a pre-approval",
			Input{Actions: []Action{Read}, PreApproved: []Action{Read}, ActionOverrides: per(map[Action]Verdict{Read: Prompt})},
			Prompt, RuleOverride, Read, ""},
		{"a pre-approval lifts an action type without an entry",
			Input{Actions: []Action{Delete, Read}, PreApproved: []Action{Delete}, ActionOverrides: per(map[Action]Verdict{Read: Allow})},
			Allow, RulePreApproved, Delete, "pre-approved"},
		{"a value that is not a verdict denies",
			Input{Actions: []Action{Read}, ActionOverrides: per(map[Action]Verdict{Read: "sure"})},
			Deny, RuleOverride, Read, `tool override p/t for read is not a verdict ("sure"): deny`},
		{"the single-verdict form of the same key decides",
			Input{Actions: []Action{Read}, Overrides: map[string]Verdict{"p/t": Deny}, ActionOverrides: per(map[Action]Verdict{Read: Allow})},
			Deny, RuleOverride, "", ""},
		{"another tool's entry does not apply",
			Input{Actions: []Action{Delete}, ActionOverrides: map[string]map[Action]Verdict{"p/other": {Delete: Allow}}},
			Prompt, RuleGlobal, Delete, ""},
		{"strict ignores them",
			Input{Actions: []Action{Delete}, Strict: true, ActionOverrides: per(map[Action]Verdict{Delete: Allow})},
			Deny, RuleGlobal, Delete, "strict policy"},
		{"critical risk is not lifted",
			Input{Actions: critical, TrustLevel: "unverified", ActionOverrides: per(map[Action]Verdict{
				Delete: Allow, Execute: Allow, WriteExternal: Allow, CredentialUse: Allow})},
			Deny, RuleCritical, "", ""},
		{"a permission ceiling is not lifted",
			Input{Actions: []Action{Read}, Permissions: Permissions{Network: "unrestricted"}, Ceiling: Permissions{Network: "none"},
				ActionOverrides: per(map[Action]Verdict{Read: Allow})},
			Deny, RulePermission, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Package, c.in.Tool = "p", "t"
			if c.in.TrustLevel == "" {
				c.in.TrustLevel = "trusted"
			}
			d := Decide(c.in)
			if d.Verdict != c.want || d.Rule != c.rule || (c.action != "" && d.Action != c.action) {
				t.Fatalf("got %s by %s on %q (%s), want %s by %s on %q", d.Verdict, d.Rule, d.Action, d.Reason(), c.want, c.rule, c.action)
			}
			if !strings.Contains(d.Reason(), c.reason) {
				t.Fatalf("reason %q lacks %q", d.Reason(), c.reason)
			}
		})
	}
}

// Environment escalation and the permission prompt skip the action types
// the user overrode for the tool, and apply to the rest.
func TestActionOverridesEscalation(t *testing.T) {
	root := Env{Root: true}
	cases := []struct {
		name string
		in   Input
		want Verdict
		esc  Escalation
	}{
		{"an overridden high-risk allow is not raised as root",
			Input{Actions: []Action{Delete}, Env: root, ActionOverrides: map[string]map[Action]Verdict{"p/t": {Delete: Allow}}},
			Allow, ""},
		{"a high-risk action type the policy allows is raised as root",
			Input{Actions: []Action{Read, Delete}, Env: root, Global: map[Action]Verdict{Delete: Allow},
				ActionOverrides: map[string]map[Action]Verdict{"p/t": {Read: Allow}}},
			Prompt, EscalationRoot},
		{"an overridden high-risk action type beside a low-risk one is not raised",
			Input{Actions: []Action{Read, Delete}, Env: root, ActionOverrides: map[string]map[Action]Verdict{"p/t": {Delete: Allow}}},
			Allow, ""},
		{"the permission prompt applies while an action type follows the policy",
			Input{Actions: []Action{Read, NetworkEgress}, Permissions: Permissions{Network: "unrestricted"}, PromptCeiling: Permissions{Network: "restricted"},
				ActionOverrides: map[string]map[Action]Verdict{"p/t": {Read: Allow}}},
			Prompt, EscalationPermission},
		{"every action type overridden: no permission prompt, as with a single verdict",
			Input{Actions: []Action{Read, NetworkEgress}, Permissions: Permissions{Network: "unrestricted"}, PromptCeiling: Permissions{Network: "restricted"},
				ActionOverrides: map[string]map[Action]Verdict{"p/t": {Read: Allow, NetworkEgress: Allow}}},
			Allow, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Package, c.in.Tool, c.in.TrustLevel = "p", "t", "trusted"
			d := Decide(c.in)
			if d.Verdict != c.want || d.Escalation != c.esc {
				t.Fatalf("got %s, escalation %q (%s); want %s, %q", d.Verdict, d.Escalation, d.Reason(), c.want, c.esc)
			}
		})
	}
}

// Decide stays allocation-free with per-action overrides.
func TestActionOverridesNoAlloc(t *testing.T) {
	in := Input{Package: "web-search", Tool: "search", Actions: []Action{Read, NetworkEgress, Delete}, TrustLevel: "verified",
		ActionOverrides: map[string]map[Action]Verdict{"web-search/search": {Delete: Allow, Read: Prompt}},
		PreApproved:     []Action{NetworkEgress}}
	if n := testing.AllocsPerRun(100, func() { _ = Decide(in) }); n != 0 {
		t.Errorf("Decide allocates %v times per call", n)
	}
}
