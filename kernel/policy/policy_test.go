package policy

import (
	"reflect"
	"testing"
)

func TestClassifyNamePrefixes(t *testing.T) {
	cases := map[string]Action{
		"delete_file": Delete, "remove": Delete, "dropTable": Delete,
		"send_mail": WriteExternal, "post": WriteExternal, "email_user": WriteExternal,
		"create_note": WriteLocal, "write": WriteLocal, "update_row": WriteLocal,
		"get_weather": Read, "read": Read, "list_files": Read,
		"run": Execute, "exec_cmd": Execute, "eval": Execute, "shell": Execute,
		"compute_sum": Compute, "parse_csv": Compute,
		"frobnicate": Unknown, "": Unknown,
	}
	for name, want := range cases {
		got := Classify(ClassifyInput{ToolName: name})
		if !reflect.DeepEqual(got, []Action{want}) {
			t.Errorf("Classify(%q) = %v, want [%s]", name, got, want)
		}
	}
}

func TestClassifyDeclaredAndPermissions(t *testing.T) {
	got := Classify(ClassifyInput{ToolName: "delete_x", DeclaredAction: "read", NetworkLevel: "restricted",
		CodeExecutionLevel: "sandboxed", Connector: true})
	want := []Action{CredentialUse, Execute, NetworkEgress, Read}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	if got := Classify(ClassifyInput{ToolName: "get", NetworkLevel: "none", CodeExecutionLevel: "none"}); !reflect.DeepEqual(got, []Action{Read}) {
		t.Fatalf("network none / code none added actions: %v", got)
	}
}

func TestDefaultAndStrictTables(t *testing.T) {
	def := map[Action]Verdict{Delete: Prompt, WriteExternal: Prompt, Execute: Prompt, CredentialUse: Prompt,
		Unknown: Prompt, NetworkEgress: Allow, WriteLocal: Allow, Read: Allow, Compute: Allow}
	strict := map[Action]Verdict{Delete: Deny, WriteExternal: Deny, Execute: Deny, Unknown: Deny,
		CredentialUse: Prompt, WriteLocal: Prompt, NetworkEgress: Allow, Read: Allow, Compute: Allow}
	for _, a := range Actions {
		// trusted, no secrets: risk never critical for one action
		d := Decide(Input{Actions: []Action{a}, TrustLevel: "trusted"})
		if d.Verdict != def[a] {
			t.Errorf("default %s = %s, want %s", a, d.Verdict, def[a])
		}
		s := Decide(Input{Actions: []Action{a}, TrustLevel: "trusted", Strict: true,
			Overrides: map[string]Verdict{"p/t": Allow}, Global: map[Action]Verdict{a: Allow}})
		if s.Verdict != strict[a] {
			t.Errorf("strict %s = %s, want %s", a, s.Verdict, strict[a])
		}
	}
}

func TestRiskBandsAndCritical(t *testing.T) {
	cases := []struct {
		actions []Action
		trust   string
		env     Env
		score   int
		band    Band
	}{
		{[]Action{Read}, "trusted", Env{}, 0, Low},
		{[]Action{Delete}, "trusted", Env{}, 20, Low},
		{[]Action{Delete, Execute}, "trusted", Env{}, 35, Medium},
		{[]Action{Delete, Execute, CredentialUse}, "trusted", Env{}, 45, Medium},
		{[]Action{Delete, Execute, WriteExternal}, "trusted", Env{}, 50, High},
		{[]Action{Delete, Execute, WriteExternal}, "unverified", Env{}, 70, High},
		{[]Action{Delete, Execute, WriteExternal, NetworkEgress}, "unverified", Env{SecretsPresent: true}, 85, Critical},
		{[]Action{NetworkEgress}, "trusted", Env{SecretsPresent: true}, 15, Low},
	}
	for _, c := range cases {
		s, b := Risk(c.actions, c.trust, c.env)
		if s != c.score || b != c.band {
			t.Errorf("Risk(%v,%s,%+v) = %d %s, want %d %s", c.actions, c.trust, c.env, s, b, c.score, c.band)
		}
	}
	// Critical denies and no override lifts it.
	d := Decide(Input{Package: "p", Tool: "t", Actions: cases[6].actions, TrustLevel: "unverified",
		Env: Env{SecretsPresent: true}, Overrides: map[string]Verdict{"p/t": Allow},
		Global: map[Action]Verdict{Delete: Allow, Execute: Allow, WriteExternal: Allow, NetworkEgress: Allow}})
	if d.Verdict != Deny || d.Band != Critical {
		t.Fatalf("critical not denied: %+v", d)
	}
}

func TestOverridesAndGlobal(t *testing.T) {
	d := Decide(Input{Package: "p", Tool: "t", Actions: []Action{Delete}, TrustLevel: "trusted",
		Overrides: map[string]Verdict{"p/t": Allow}})
	if d.Verdict != Allow {
		t.Fatalf("override ignored: %+v", d)
	}
	d = Decide(Input{Package: "p", Tool: "t", Actions: []Action{Read, Compute}, TrustLevel: "trusted",
		Global: map[Action]Verdict{Compute: Deny}})
	if d.Verdict != Deny {
		t.Fatalf("global deny for one of two actions ignored: %+v", d)
	}
	if d := Decide(Input{TrustLevel: "trusted"}); d.Verdict != Deny {
		t.Fatalf("no actions must deny, got %+v", d)
	}
	if d := Decide(Input{Actions: []Action{"bogus"}, TrustLevel: "trusted"}); d.Verdict != Deny {
		t.Fatalf("unknown action type must deny, got %+v", d)
	}
}

func TestEnvFrom(t *testing.T) {
	e := EnvFrom([]string{"PATH=/bin", "OPENAI_API_KEY=sk-x", "CI=true"})
	if !e.SecretsPresent || !e.CI {
		t.Fatalf("%+v", e)
	}
	e = EnvFrom([]string{"CI=false", "OPENAI_API_KEY=", "HOME=/root"})
	if e.SecretsPresent || e.CI {
		t.Fatalf("false positives: %+v", e)
	}
	if !EnvFrom([]string{"GITHUB_ACTIONS=1"}).CI || !EnvFrom([]string{"SECRET_TOKEN=a"}).SecretsPresent {
		t.Fatal("missed markers")
	}
}
