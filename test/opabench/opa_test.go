package opabench

import (
	"context"
	_ "embed"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/agentnode/agentnode/kernel/policy"
)

//go:embed testdata/guard.rego
var guardRego string

// call is one decision, as Go input for policy.Decide and as OPA input.
type call struct {
	name string
	in   policy.Input
}

func (c call) opaInput() map[string]any {
	actions := make([]any, len(c.in.Actions))
	for i, a := range c.in.Actions {
		actions[i] = string(a)
	}
	global := map[string]any{}
	for a, v := range c.in.Global {
		global[string(a)] = string(v)
	}
	overrides := map[string]any{}
	for k, v := range c.in.Overrides {
		overrides[k] = string(v)
	}
	return map[string]any{
		"package": c.in.Package, "tool": c.in.Tool, "actions": actions, "trust": c.in.TrustLevel,
		"strict": c.in.Strict, "global": global, "overrides": overrides,
		"env": map[string]any{"secrets_present": c.in.Env.SecretsPresent},
	}
}

func calls() []call {
	global := map[policy.Action]policy.Verdict{}
	for a, v := range policy.DefaultPolicy {
		global[a] = v
	}
	global[policy.WriteLocal] = policy.Prompt
	overrides := map[string]policy.Verdict{"web-search/fetch": policy.Allow, "file-tools/delete_file": policy.Deny,
		"mail-pack/send_mail": policy.Prompt}
	base := policy.Input{Package: "web-search", Tool: "search", TrustLevel: "verified", Global: global, Overrides: overrides}
	with := func(name string, f func(*policy.Input)) call {
		in := base
		f(&in)
		return call{name, in}
	}
	return []call{
		with("global", func(in *policy.Input) { in.Actions = []policy.Action{policy.NetworkEgress, policy.Read} }),
		with("global-prompt", func(in *policy.Input) { in.Actions = []policy.Action{policy.Read, policy.WriteLocal} }),
		with("override", func(in *policy.Input) {
			in.Package, in.Tool, in.Actions = "file-tools", "delete_file", []policy.Action{policy.Delete}
		}),
		with("override-allow", func(in *policy.Input) {
			in.Tool, in.Actions = "fetch", []policy.Action{policy.Execute, policy.NetworkEgress}
		}),
		with("critical", func(in *policy.Input) {
			in.Tool = "fetch"
			in.Actions = []policy.Action{policy.Delete, policy.Execute, policy.WriteExternal, policy.CredentialUse}
			in.TrustLevel = "unverified"
		}),
		with("critical-secrets", func(in *policy.Input) {
			in.Actions = []policy.Action{policy.Execute, policy.WriteExternal, policy.CredentialUse, policy.NetworkEgress}
			in.TrustLevel, in.Env = "unknown", policy.Env{SecretsPresent: true}
		}),
		with("strict", func(in *policy.Input) {
			in.Tool, in.Strict, in.Actions = "fetch", true, []policy.Action{policy.Delete}
		}),
		with("strict-prompt", func(in *policy.Input) {
			in.Strict, in.Actions = true, []policy.Action{policy.WriteLocal, policy.Read}
		}),
		with("unknown-action", func(in *policy.Input) { in.Actions = []policy.Action{"bogus"} }),
		with("no-actions", func(in *policy.Input) { in.Actions = nil }),
	}
}

func prepare(tb testing.TB) rego.PreparedEvalQuery {
	tb.Helper()
	pq, err := rego.New(rego.Query("data.agentnode.guard.decision"), rego.Module("guard.rego", guardRego)).
		PrepareForEval(context.Background())
	if err != nil {
		tb.Fatalf("prepare: %v", err)
	}
	return pq
}

func opaDecide(tb testing.TB, pq rego.PreparedEvalQuery, opts ...rego.EvalOption) string {
	rs, err := pq.Eval(context.Background(), opts...)
	if err != nil {
		tb.Fatalf("eval: %v", err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		tb.Fatalf("result %v", rs)
	}
	s, _ := rs[0].Expressions[0].Value.(string)
	return s
}

// TestEquivalent: the Rego policy and policy.Decide agree on every call the
// benchmark makes, so the benchmark compares the same work.
func TestEquivalent(t *testing.T) {
	pq := prepare(t)
	for _, c := range calls() {
		want := string(policy.Decide(c.in).Verdict)
		if got := opaDecide(t, pq, rego.EvalInput(c.opaInput())); got != want {
			t.Errorf("%s: OPA says %q, agentnode %q (%s)", c.name, got, want, policy.Decide(c.in).Reason())
		}
	}
}

// BenchmarkDecide: one Guard policy decision by agentnode's engine and, on
// the same calls, by OPA (PrepareForEval once, then Eval per decision).
// opa-parsed-input converts the input to an AST value once, outside the
// loop, to show how much of OPA's time is input conversion.
func BenchmarkDecide(b *testing.B) {
	for _, c := range calls() {
		b.Run("agentnode/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			var v policy.Verdict
			for b.Loop() {
				v = policy.Decide(c.in).Verdict
			}
			_ = v
		})
	}
	pq := prepare(b)
	for _, c := range calls() {
		want := string(policy.Decide(c.in).Verdict)
		b.Run("opa/"+c.name, func(b *testing.B) {
			input := c.opaInput()
			b.ReportAllocs()
			for b.Loop() {
				if got := opaDecide(b, pq, rego.EvalInput(input)); got != want {
					b.Fatalf("OPA says %q, want %q", got, want)
				}
			}
		})
		b.Run("opa-parsed-input/"+c.name, func(b *testing.B) {
			parsed, err := ast.InterfaceToValue(c.opaInput())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if got := opaDecide(b, pq, rego.EvalParsedInput(parsed)); got != want {
					b.Fatalf("OPA says %q, want %q", got, want)
				}
			}
		})
	}
}
