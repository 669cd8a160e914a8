package policy

import (
	"reflect"
	"strings"
	"testing"
)

// Facts: "Classification: the tool's declared action_type; else a
// name-prefix heuristic (...)".
func TestClassifyNamePrefixes(t *testing.T) {
	cases := map[string]Action{
		"delete_file": Delete, "remove": Delete, "dropTable": Delete, "DELETE_ALL": Delete,
		"send_mail": WriteExternal, "post": WriteExternal, "email_user": WriteExternal,
		"create_note": WriteLocal, "write": WriteLocal, "update_row": WriteLocal,
		"get_weather": Read, "read": Read, "list_files": Read,
		"run": Execute, "exec_cmd": Execute, "eval": Execute, "shell": Execute,
		"compute_sum": Compute, "parse_csv": Compute,
		"frobnicate": Unknown, "": Unknown, "de": Unknown, "undelete": Unknown,
	}
	for name, want := range cases {
		got := Classify(ClassifyInput{ToolName: name})
		if !reflect.DeepEqual(got, []Action{want}) {
			t.Errorf("Classify(%q) = %v, want [%s]", name, got, want)
		}
	}
}

// Facts: "declared network → also network_egress; declared code execution →
// execute; a declared connector → credential_use"; the declared action_type
// wins over the name.
func TestClassifyDeclaredAndPermissions(t *testing.T) {
	cases := []struct {
		in   ClassifyInput
		want []Action
	}{
		{ClassifyInput{ToolName: "delete_x", DeclaredAction: "read"}, []Action{Read}},
		{ClassifyInput{ToolName: "get", NetworkLevel: "restricted"}, []Action{NetworkEgress, Read}},
		{ClassifyInput{ToolName: "get", NetworkLevel: "unrestricted"}, []Action{NetworkEgress, Read}},
		{ClassifyInput{ToolName: "get", CodeExecutionLevel: "limited_subprocess"}, []Action{Execute, Read}},
		{ClassifyInput{ToolName: "get", CodeExecutionLevel: "shell"}, []Action{Execute, Read}},
		{ClassifyInput{ToolName: "get", Connector: true}, []Action{CredentialUse, Read}},
		{ClassifyInput{ToolName: "get", NetworkLevel: "none", CodeExecutionLevel: "none"}, []Action{Read}},
		{ClassifyInput{ToolName: "delete_x", DeclaredAction: "read", NetworkLevel: "restricted",
			CodeExecutionLevel: "shell", Connector: true}, []Action{CredentialUse, Execute, NetworkEgress, Read}},
		{ClassifyInput{ToolName: "run", DeclaredAction: "execute", CodeExecutionLevel: "shell"}, []Action{Execute}},
		{ClassifyInput{ToolName: "x", DeclaredAction: "bogus"}, []Action{"bogus"}},
	}
	for _, c := range cases {
		if got := Classify(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Classify(%+v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// Facts: the default and the strict tables, action by action; strict
// ignores per-tool overrides (and, ours, guard.<action> and pre-approvals).
func TestDefaultAndStrictTables(t *testing.T) {
	def := map[Action]Verdict{Delete: Prompt, WriteExternal: Prompt, Execute: Prompt, CredentialUse: Prompt,
		Unknown: Prompt, NetworkEgress: Allow, WriteLocal: Allow, Read: Allow, Compute: Allow}
	strict := map[Action]Verdict{Delete: Deny, WriteExternal: Deny, Execute: Deny, Unknown: Deny,
		CredentialUse: Prompt, WriteLocal: Prompt, NetworkEgress: Allow, Read: Allow, Compute: Allow}
	if !reflect.DeepEqual(DefaultPolicy, def) || !reflect.DeepEqual(StrictPolicy, strict) {
		t.Fatalf("exported tables differ from the facts:\n%v\n%v", DefaultPolicy, StrictPolicy)
	}
	for _, a := range Actions {
		// trusted, no secrets, not root: one action is never critical or
		// escalated.
		d := Decide(Input{Package: "p", Tool: "t", Actions: []Action{a}, TrustLevel: "trusted"})
		if d.Verdict != def[a] || d.Rule != RuleGlobal || d.Action != a {
			t.Errorf("default %s = %s (%s), want %s", a, d.Verdict, d.Reason(), def[a])
		}
		s := Decide(Input{Package: "p", Tool: "t", Actions: []Action{a}, TrustLevel: "trusted", Strict: true,
			Overrides: map[string]Verdict{"p/t": Allow}, Global: map[Action]Verdict{a: Allow},
			PreApproved: Actions})
		if s.Verdict != strict[a] || s.Rule != RuleGlobal {
			t.Errorf("strict %s = %s (%s), want %s", a, s.Verdict, s.Reason(), strict[a])
		}
		if !strings.HasPrefix(s.Reason(), "strict policy: "+string(a)) {
			t.Errorf("strict reason %q", s.Reason())
		}
	}
}

// Facts: the risk score contributions and the bands (≥71 critical, ≥46
// high, ≥21 medium), at every boundary.
func TestRiskScoreAndBands(t *testing.T) {
	secrets := Env{SecretsPresent: true}
	cases := []struct {
		name    string
		actions []Action
		trust   string
		env     Env
		score   int
		band    Band
	}{
		{"read", []Action{Read}, "trusted", Env{}, 0, Low},
		{"delete +20", []Action{Delete}, "trusted", Env{}, 20, Low},
		{"write_external +15", []Action{WriteExternal}, "trusted", Env{}, 15, Low},
		{"execute +15", []Action{Execute}, "trusted", Env{}, 15, Low},
		{"credential_use +10", []Action{CredentialUse}, "trusted", Env{}, 10, Low},
		{"unverified with a high-risk action +20", []Action{CredentialUse}, "unverified", Env{}, 30, Medium},
		{"unknown trust counts as unverified", []Action{CredentialUse}, "unknown", Env{}, 30, Medium},
		{"no trust counts as unverified", []Action{CredentialUse}, "", Env{}, 30, Medium},
		{"verified is not unverified", []Action{CredentialUse}, "verified", Env{}, 10, Low},
		{"unverified without a high-risk action +0", []Action{Read, WriteLocal, NetworkEgress}, "unverified", Env{}, 0, Low},
		{"secrets with network egress +15", []Action{NetworkEgress}, "trusted", secrets, 15, Low},
		{"secrets without network egress +0", []Action{Delete}, "trusted", secrets, 20, Low},
		{"network egress without secrets +0", []Action{NetworkEgress}, "trusted", Env{Root: true, CI: true}, 0, Low},
		{"20 is low", []Action{Delete}, "curated", Env{}, 20, Low},
		{"25 is medium (≥21)", []Action{Execute, CredentialUse}, "trusted", Env{}, 25, Medium},
		{"45 is medium", []Action{Delete, Execute, CredentialUse}, "trusted", Env{}, 45, Medium},
		{"50 is high (≥46)", []Action{Delete, Execute, WriteExternal}, "trusted", Env{}, 50, High},
		{"70 is high", []Action{Delete, Execute, WriteExternal}, "unverified", Env{}, 70, High},
		{"all four, trusted: 60", []Action{Delete, Execute, WriteExternal, CredentialUse}, "trusted", Env{}, 60, High},
		{"75 is critical (≥71)", []Action{Execute, WriteExternal, CredentialUse, NetworkEgress}, "unverified", secrets, 75, Critical},
		{"65 is high", []Action{Delete, WriteExternal, CredentialUse}, "unverified", Env{}, 65, High},
		{"80 is critical", []Action{Delete, Execute, WriteExternal, CredentialUse}, "unverified", Env{}, 80, Critical},
		{"85 is critical", []Action{Delete, Execute, WriteExternal, NetworkEgress}, "unverified", secrets, 85, Critical},
		{"everything: 95", Actions, "unknown", secrets, 95, Critical},
		{"duplicates count once", []Action{Delete, Delete, Delete}, "trusted", Env{}, 20, Low},
	}
	for _, c := range cases {
		s, b := Risk(c.actions, c.trust, c.env)
		if s != c.score || b != c.band {
			t.Errorf("%s: Risk(%v,%q,%+v) = %d %s, want %d %s", c.name, c.actions, c.trust, c.env, s, b, c.score, c.band)
		}
	}
	for score, want := range map[int]Band{0: Low, 20: Low, 21: Medium, 45: Medium, 46: High, 70: High, 71: Critical, 200: Critical} {
		if got := BandOf(score); got != want {
			t.Errorf("BandOf(%d) = %s, want %s", score, got, want)
		}
	}
}

// Facts: "critical (always deny, no override)" and the precedence
// "critical → per-tool override → agent pre-approved actions → global
// policy".
func TestPrecedence(t *testing.T) {
	critical := []Action{Delete, Execute, WriteExternal, CredentialUse} // 80 when unverified
	allowAll := map[Action]Verdict{}
	for _, a := range Actions {
		allowAll[a] = Allow
	}
	cases := []struct {
		name string
		in   Input
		want Verdict
		rule Rule
	}{
		{"critical beats an allow override, allow globals and pre-approvals",
			Input{Actions: critical, TrustLevel: "unverified", Overrides: map[string]Verdict{"p/t": Allow},
				Global: allowAll, PreApproved: Actions}, Deny, RuleCritical},
		{"critical beats an allow override in strict mode too",
			Input{Actions: critical, TrustLevel: "unverified", Strict: true, Overrides: map[string]Verdict{"p/t": Allow}},
			Deny, RuleCritical},
		{"override allow beats the global prompt",
			Input{Actions: []Action{Delete}, TrustLevel: "trusted", Overrides: map[string]Verdict{"p/t": Allow}}, Allow, RuleOverride},
		{"override deny beats the global allow",
			Input{Actions: []Action{Read}, TrustLevel: "trusted", Overrides: map[string]Verdict{"p/t": Deny}}, Deny, RuleOverride},
		{"override prompt beats a pre-approval",
			Input{Actions: []Action{Read}, TrustLevel: "trusted", Overrides: map[string]Verdict{"p/t": Prompt},
				PreApproved: Actions}, Prompt, RuleOverride},
		{"override allow beats a global deny",
			Input{Actions: []Action{Read}, TrustLevel: "trusted", Overrides: map[string]Verdict{"p/t": Allow},
				Global: map[Action]Verdict{Read: Deny}}, Allow, RuleOverride},
		{"an override of another tool does not apply",
			Input{Actions: []Action{Delete}, TrustLevel: "trusted", Overrides: map[string]Verdict{"p/other": Allow, "q/t": Allow}},
			Prompt, RuleGlobal},
		{"an override that is not a verdict denies",
			Input{Actions: []Action{Read}, TrustLevel: "trusted", Overrides: map[string]Verdict{"p/t": "yes"}}, Deny, RuleOverride},
		{"strict ignores overrides",
			Input{Actions: []Action{Delete}, TrustLevel: "trusted", Strict: true, Overrides: map[string]Verdict{"p/t": Allow}},
			Deny, RuleGlobal},
		{"pre-approval turns the global prompt into allow",
			Input{Actions: []Action{Delete}, TrustLevel: "trusted", PreApproved: []Action{Delete}}, Allow, RulePreApproved},
		{"pre-approval of one action leaves the other's prompt",
			Input{Actions: []Action{Delete, Execute}, TrustLevel: "trusted", PreApproved: []Action{Delete}}, Prompt, RuleGlobal},
		{"pre-approval never lifts a global deny",
			Input{Actions: []Action{Delete}, TrustLevel: "trusted", PreApproved: []Action{Delete},
				Global: map[Action]Verdict{Delete: Deny}}, Deny, RuleGlobal},
		{"strict ignores pre-approvals",
			Input{Actions: []Action{CredentialUse}, TrustLevel: "trusted", Strict: true, PreApproved: []Action{CredentialUse}},
			Prompt, RuleGlobal},
		{"global guard.<action> beats the default table",
			Input{Actions: []Action{Delete}, TrustLevel: "trusted", Global: map[Action]Verdict{Delete: Allow}}, Allow, RuleGlobal},
		{"strict ignores guard.<action>",
			Input{Actions: []Action{Delete}, TrustLevel: "trusted", Strict: true, Global: map[Action]Verdict{Delete: Allow}}, Deny, RuleGlobal},
		{"the strictest action wins",
			Input{Actions: []Action{Read, Compute}, TrustLevel: "trusted", Global: map[Action]Verdict{Compute: Deny}}, Deny, RuleGlobal},
		{"a global verdict that is not one denies",
			Input{Actions: []Action{Read}, TrustLevel: "trusted", Global: map[Action]Verdict{Read: ""}}, Deny, RuleGlobal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Package, c.in.Tool = "p", "t"
			d := Decide(c.in)
			if d.Verdict != c.want || d.Rule != c.rule {
				t.Fatalf("got %s by %s (%s), want %s by %s", d.Verdict, d.Rule, d.Reason(), c.want, c.rule)
			}
			if d.Reason() == "" {
				t.Fatal("no reason")
			}
		})
	}
}

// An internal error denies, and nothing lifts it.
func TestInternalErrorsDeny(t *testing.T) {
	lift := map[string]Verdict{"p/t": Allow}
	for name, in := range map[string]Input{
		"no actions":          {Package: "p", Tool: "t", TrustLevel: "curated", Overrides: lift},
		"unknown action type": {Package: "p", Tool: "t", Actions: []Action{Read, "bogus"}, TrustLevel: "curated", Overrides: lift},
		"empty action type":   {Package: "p", Tool: "t", Actions: []Action{""}, TrustLevel: "curated", Overrides: lift},
	} {
		d := Decide(in)
		if d.Verdict != Deny || d.Rule != RuleInternal {
			t.Errorf("%s: %s by %s (%s)", name, d.Verdict, d.Rule, d.Reason())
		}
	}
	if r := Decide(Input{Actions: []Action{"bogus"}}).Reason(); !strings.Contains(r, `"bogus"`) {
		t.Errorf("reason %q does not name the action type", r)
	}
}

// Permission ceilings: a declared level above the ceiling denies, and
// nothing lifts it; no ceiling, no check.
func TestPermissionCeilings(t *testing.T) {
	decl := Permissions{Network: "restricted", Filesystem: "workspace_read", CodeExecution: "limited_subprocess"}
	lift := map[string]Verdict{"p/t": Allow}
	cases := []struct {
		name     string
		declared Permissions
		ceiling  Permissions
		want     Verdict
		reason   string
	}{
		{"no ceiling", decl, Permissions{}, Allow, ""},
		{"at the ceiling", decl, decl, Allow, ""},
		{"below the ceiling", decl, Permissions{Network: "unrestricted", Filesystem: "any", CodeExecution: "shell"}, Allow, ""},
		{"network above", decl, Permissions{Network: "none"}, Deny, `network level "restricted", above the allowed "none"`},
		{"filesystem above", decl, Permissions{Filesystem: "temp"}, Deny, `filesystem level "workspace_read"`},
		{"code execution above", decl, Permissions{CodeExecution: "none"}, Deny, "code_execution"},
		{"unknown declared level under a ceiling", Permissions{Network: "some"}, Permissions{Network: "unrestricted"}, Deny, "no known network level"},
		{"undeclared level under a ceiling", Permissions{}, Permissions{Filesystem: "any"}, Deny, "no known filesystem level"},
		{"unknown ceiling level", decl, Permissions{CodeExecution: "lots"}, Deny, "is not a code_execution level"},
		{"unknown declared level without a ceiling", Permissions{Network: "some"}, Permissions{}, Allow, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(Input{Package: "p", Tool: "t", Actions: []Action{Read}, TrustLevel: "trusted",
				Permissions: c.declared, Ceiling: c.ceiling, Overrides: lift})
			if d.Verdict != c.want {
				t.Fatalf("got %s (%s), want %s", d.Verdict, d.Reason(), c.want)
			}
			if c.want == Deny && (d.Rule != RulePermission || !strings.Contains(d.Reason(), c.reason)) {
				t.Fatalf("rule %s reason %q, want %s containing %q", d.Rule, d.Reason(), RulePermission, c.reason)
			}
		})
	}
}

// Environment escalation: allow → prompt for high-risk actions when the
// band is high, when root, or with secrets and network egress; never for
// low-risk actions, never over an override, never to deny.
func TestEnvironmentEscalation(t *testing.T) {
	allowHigh := map[Action]Verdict{Delete: Allow, Execute: Allow, WriteExternal: Allow, CredentialUse: Allow}
	cases := []struct {
		name string
		in   Input
		want Verdict
		esc  Escalation
	}{
		{"high band", Input{Actions: []Action{Delete, Execute, WriteExternal}, TrustLevel: "trusted", Global: allowHigh},
			Prompt, EscalationHighBand},
		{"medium band, not root, no secrets", Input{Actions: []Action{Delete, Execute}, TrustLevel: "trusted", Global: allowHigh},
			Allow, ""},
		{"root with a high-risk action", Input{Actions: []Action{Delete}, TrustLevel: "trusted", Global: allowHigh, Env: Env{Root: true}},
			Prompt, EscalationRoot},
		{"root with low-risk actions only", Input{Actions: []Action{Read, WriteLocal, NetworkEgress}, TrustLevel: "trusted", Env: Env{Root: true}},
			Allow, ""},
		{"secrets, network egress and a high-risk action",
			Input{Actions: []Action{CredentialUse, NetworkEgress}, TrustLevel: "trusted", Global: allowHigh, Env: Env{SecretsPresent: true}},
			Prompt, EscalationSecrets},
		{"secrets and network egress, nothing high-risk",
			Input{Actions: []Action{Read, NetworkEgress}, TrustLevel: "trusted", Env: Env{SecretsPresent: true}}, Allow, ""},
		{"secrets and a high-risk action without network", Input{Actions: []Action{Delete}, TrustLevel: "trusted",
			Global: allowHigh, Env: Env{SecretsPresent: true}}, Allow, ""},
		{"CI alone does not escalate", Input{Actions: []Action{Delete}, TrustLevel: "trusted", Global: allowHigh, Env: Env{CI: true}},
			Allow, ""},
		{"pre-approved allow is escalated too", Input{Actions: []Action{Delete}, TrustLevel: "trusted",
			PreApproved: []Action{Delete}, Env: Env{Root: true}}, Prompt, EscalationRoot},
		{"an override is not escalated", Input{Actions: []Action{Delete}, TrustLevel: "trusted",
			Overrides: map[string]Verdict{"p/t": Allow}, Env: Env{Root: true, SecretsPresent: true}}, Allow, ""},
		{"a deny stays a deny", Input{Actions: []Action{Delete}, TrustLevel: "trusted",
			Global: map[Action]Verdict{Delete: Deny}, Env: Env{Root: true}}, Deny, ""},
		{"strict deny stays a deny as root", Input{Actions: []Action{Execute}, TrustLevel: "trusted", Strict: true, Env: Env{Root: true}},
			Deny, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Package, c.in.Tool = "p", "t"
			d := Decide(c.in)
			if d.Verdict != c.want || d.Escalation != c.esc {
				t.Fatalf("got %s escalation %q (%s), want %s %q", d.Verdict, d.Escalation, d.Reason(), c.want, c.esc)
			}
			if c.esc != "" && !strings.Contains(d.Reason(), "raised to prompt") {
				t.Fatalf("reason %q does not say why", d.Reason())
			}
		})
	}
}

// Facts: "Secrets present = env var names starting AWS_, OPENAI_, STRIPE_,
// GCP_, AZURE_, ANTHROPIC_, DATABASE_URL, SECRET. CI = CI, GITHUB_ACTIONS,
// GITLAB_CI, CIRCLECI, JENKINS_URL, TRAVIS."
func TestEnvFrom(t *testing.T) {
	for _, kv := range []string{"AWS_ACCESS_KEY_ID=x", "OPENAI_API_KEY=sk-x", "STRIPE_KEY=x", "GCP_CREDS=x",
		"AZURE_TOKEN=x", "ANTHROPIC_API_KEY=x", "DATABASE_URL=postgres://", "DATABASE_URL_RO=x", "SECRET=x", "SECRET_TOKEN=a"} {
		if e := EnvFrom([]string{"PATH=/bin", kv}); !e.SecretsPresent || e.CI {
			t.Errorf("%s: %+v", kv, e)
		}
	}
	for _, kv := range []string{"OPENAI_API_KEY=", "MY_AWS_KEY=x", "aws_key=x", "TOKEN=x", "HOME=/root", "DATABASE=x"} {
		if e := EnvFrom([]string{kv}); e.SecretsPresent {
			t.Errorf("%s counted as a secret", kv)
		}
	}
	for _, kv := range []string{"CI=true", "CI=1", "GITHUB_ACTIONS=true", "GITLAB_CI=true", "CIRCLECI=true",
		"JENKINS_URL=http://j", "TRAVIS=true"} {
		if e := EnvFrom([]string{kv}); !e.CI || e.SecretsPresent {
			t.Errorf("%s: %+v", kv, e)
		}
	}
	for _, kv := range []string{"CI=", "CI=false", "CI=0", "CI=no", "CI=off", "CONTINUOUS_INTEGRATION=1", "BUILD_ID=3"} {
		if EnvFrom([]string{kv}).CI {
			t.Errorf("%s counted as CI", kv)
		}
	}
}

func TestVerdicts(t *testing.T) {
	for _, c := range []struct{ a, b, want Verdict }{
		{Allow, Prompt, Prompt}, {Prompt, Allow, Prompt}, {Deny, Prompt, Deny}, {Allow, Allow, Allow},
		{"bogus", Allow, "bogus"}, {Prompt, Deny, Deny},
	} {
		if got := Stronger(c.a, c.b); got != c.want {
			t.Errorf("Stronger(%s,%s) = %s", c.a, c.b, got)
		}
	}
	for _, s := range []string{"allow", "prompt", "deny"} {
		if v, err := ParseVerdict(s); err != nil || string(v) != s {
			t.Errorf("ParseVerdict(%q) = %q, %v", s, v, err)
		}
	}
	for _, s := range []string{"", "Allow", "yes", "abstain"} {
		if _, err := ParseVerdict(s); err == nil {
			t.Errorf("ParseVerdict(%q) accepted", s)
		}
	}
}

func TestActionSet(t *testing.T) {
	s := SetOf([]Action{Read, Delete, Read})
	if !s.Has(Read) || !s.Has(Delete) || s.Has(Execute) || s.Invalid() || s.Has("bogus") {
		t.Fatalf("%v", s)
	}
	if got := s.String(); got != "delete, read" {
		t.Fatalf("String = %q", got)
	}
	bad := SetOf([]Action{"x"})
	if !bad.Invalid() || bad.String() != "(invalid)" {
		t.Fatalf("invalid set %v", bad)
	}
	if !reflect.DeepEqual(SetOf(Actions).List(), sortedActions) {
		t.Fatal("List order")
	}
}
