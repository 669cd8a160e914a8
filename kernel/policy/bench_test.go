package policy

import (
	"slices"
	"testing"
	"time"
)

// benchInputs are the decisions the benchmark and the allocation test make:
// one per rule of Decide, with a config-sized global map and overrides.
func benchInputs() map[string]Input {
	global := map[Action]Verdict{}
	for a, v := range DefaultPolicy {
		global[a] = v
	}
	overrides := map[string]Verdict{
		"web-search/fetch": Allow, "file-tools/delete_file": Deny, "mail-pack/send_mail": Prompt,
		"a-very-long-package-identifier-that-is-sixty-characters-long/some_rather_long_tool_name_for_the_key": Allow,
	}
	base := Input{Package: "web-search", Tool: "search", TrustLevel: "verified", Global: global, Overrides: overrides,
		Permissions: Permissions{Network: "restricted", Filesystem: "temp", CodeExecution: "none"}}
	with := func(f func(*Input)) Input {
		in := base
		f(&in)
		return in
	}
	return map[string]Input{
		"global": with(func(in *Input) { in.Actions = []Action{NetworkEgress, Read} }),
		"override": with(func(in *Input) {
			in.Package, in.Tool = "a-very-long-package-identifier-that-is-sixty-characters-long", "some_rather_long_tool_name_for_the_key"
			in.Actions = []Action{Delete}
		}),
		"pre_approved": with(func(in *Input) { in.Actions = []Action{Delete, Read}; in.PreApproved = []Action{Delete} }),
		"escalated": with(func(in *Input) {
			in.Actions = []Action{CredentialUse, NetworkEgress}
			in.Env = Env{SecretsPresent: true}
			in.PreApproved = []Action{CredentialUse}
		}),
		"critical": with(func(in *Input) {
			in.Actions = []Action{Delete, Execute, WriteExternal, CredentialUse}
			in.TrustLevel = "unverified"
		}),
		"permission": with(func(in *Input) {
			in.Actions = []Action{Read}
			in.Ceiling = Permissions{Network: "none"}
		}),
		"strict": with(func(in *Input) { in.Actions = []Action{Delete}; in.Strict = true }),
	}
}

// Decide's hot path allocates nothing, whichever rule decides.
func TestDecideDoesNotAllocate(t *testing.T) {
	for name, in := range benchInputs() {
		var d Decision
		if n := testing.AllocsPerRun(1000, func() { d = Decide(in) }); n != 0 {
			t.Errorf("%s: %.1f allocations per Decide", name, n)
		}
		if string(d.Rule) != name && !(name == "escalated" && d.Escalation != "") && !(name == "strict" && d.Rule == RuleGlobal) {
			t.Errorf("%s: decided by %s (%s)", name, d.Rule, d.Reason())
		}
	}
}

// BenchmarkDecide is one policy decision in-process (goal ≤ 5 µs p50, 0
// allocations). After the timed loop, p50-ns is the median over 2000
// batches of 64 decisions (timing single calls would mostly time the clock).
// The OPA comparison is in test/opabench, a separate module (make bench-opa).
func BenchmarkDecide(b *testing.B) {
	inputs := benchInputs()
	for _, name := range []string{"global", "override", "pre_approved", "escalated", "critical", "permission", "strict"} {
		in := inputs[name]
		b.Run(name, func(b *testing.B) {
			var sink Verdict
			b.ReportAllocs()
			for b.Loop() {
				sink = Decide(in).Verdict
			}
			if sink == "" {
				b.Fatal("no verdict")
			}
			b.ReportMetric(p50(func() { sink = Decide(in).Verdict }), "p50-ns")
		})
	}
}

// p50 returns the median duration of f in nanoseconds, measured in batches.
func p50(f func()) float64 {
	const batches, batch = 2000, 64
	samples := make([]time.Duration, batches)
	for i := range samples {
		start := time.Now()
		for range batch {
			f()
		}
		samples[i] = time.Since(start) / batch
	}
	slices.Sort(samples)
	return float64(samples[batches/2].Nanoseconds())
}
