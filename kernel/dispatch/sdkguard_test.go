package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/auditverify"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/policy"
	"github.com/agentnode/agentnode/kernel/ratelimit"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
)

// sdkGuardPipeline is the real config stage → a stand-in for the package
// stages (a curated toolpack acme-pack whose tool purge_cache is delete and
// network_egress) → the real policy and prompt stages, with execution
// replaced by a counter. The kernel is not interactive: a prompt is a
// refusal (policy_prompt).
func sdkGuardPipeline(t *testing.T) *int {
	t.Helper()
	withStages(t,
		stage{name: "config", code: reason.ConfigInvalid, run: stageConfig},
		stage{name: "package", code: reason.ArtifactMismatch, run: func(_ context.Context, st *state) error {
			p := perms("restricted", "temp", "none")
			st.pkg = &store.Package{ID: "acme-pack", Version: "1.0.0",
				Manifest: &manifest.Manifest{PackageID: "acme-pack", PackageType: "toolpack", Runtime: "exec", Permissions: p}}
			st.tool = &manifest.Tool{Name: "purge_cache", ActionType: "delete"}
			st.actions = policy.Classify(policy.ClassifyInput{ToolName: "purge_cache", DeclaredAction: "delete",
				NetworkLevel: p.Network.Level, CodeExecutionLevel: p.CodeExecution.Level})
			st.res.Trust, st.res.Placement = "curated", PlacementHost
			return nil
		}},
		stage{name: "policy", code: reason.PolicyDenied, run: stagePolicy},
		stage{name: "prompt", code: reason.PolicyPrompt, run: stagePrompt})
	ran := 0
	saved := executeStage
	executeStage = stage{name: "execute", code: reason.PluginUnavailable, run: func(context.Context, *state) error {
		ran++
		return nil
	}}
	t.Cleanup(func() { executeStage = saved })
	return &ran
}

// outcome is "allow", or the refusal's code and reason.
func outcome(res *Result, err error) string {
	if err != nil {
		return fmt.Sprintf("%s: %v", reason.CodeOf(err), err)
	}
	return res.Decision
}

// matches reports whether an outcome is want: "allow", or "CODE: part of
// the reason".
func matches(got, want string) bool {
	code, why, _ := strings.Cut(want, ": ")
	return got == want || (strings.HasPrefix(got, code+": ") && strings.Contains(got, why))
}

// decisionChain is the guard chain of the last decision record.
func decisionChain(t *testing.T, k *Kernel) string {
	t.Helper()
	recs, err := auditverify.Tail(home.AuditDir(k.HomeDir), 100)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Event == "decision" {
			return strings.Join(recs[i].GuardChain, ",")
		}
	}
	t.Fatal("no decision record")
	return ""
}

// TestToolOverrideObjectForm: guard.tool_overrides in the AgentNode SDK's
// object form decides per action type; the tool's other action type
// (network_egress, allowed by default) follows the policy.
func TestToolOverrideObjectForm(t *testing.T) {
	cases := []struct {
		name, override string
		global         map[string]string
		want           string // "allow" or a code and part of the reason
	}{
		{"no override: delete prompts", "", nil, "policy_prompt: default policy: delete → prompt"},
		{"delete allowed", `{"delete":"allow"}`, nil, "allow"},
		{"delete allowed, network_egress still the policy's deny", `{"delete":"allow"}`, map[string]string{"network_egress": "deny"},
			"policy_denied: default policy: network_egress → deny"},
		{"delete denied", `{"delete":"deny"}`, nil, "policy_denied: tool override acme-pack/purge_cache for delete: deny"},
		{"network_egress prompts", `{"delete":"allow","network_egress":"prompt"}`, nil,
			"policy_prompt: tool override acme-pack/purge_cache for network_egress: prompt"},
		{"an action type the tool does not have changes nothing", `{"read":"allow","execute":"deny"}`, nil,
			"policy_prompt: default policy: delete → prompt"},
		{"an empty object changes nothing", `{}`, nil, "policy_prompt: default policy: delete → prompt"},
		{"the single-verdict form still decides the whole call", `allow`, map[string]string{"network_egress": "deny"}, "allow"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newHome(t)
			ran := sdkGuardPipeline(t)
			if tc.override != "" {
				setConfig(t, k, "guard.tool_overrides.acme-pack/purge_cache", tc.override)
			}
			for a, v := range tc.global {
				setConfig(t, k, "guard."+a, v)
			}
			got := outcome(k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "purge_cache"}))
			if !matches(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if want := 0; tc.want == "allow" {
				want = 1
				if *ran != want {
					t.Fatalf("ran %d times, want %d", *ran, want)
				}
			} else if *ran != 0 {
				t.Fatal("a refused call ran")
			}
		})
	}
	// Strict mode ignores it, as it ignores the single-verdict form.
	k := newHome(t)
	sdkGuardPipeline(t)
	setConfig(t, k, "guard.tool_overrides.acme-pack/purge_cache", `{"delete":"allow"}`)
	setConfig(t, k, "guard.strict", "true")
	if _, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "purge_cache"}); !errors.Is(err, reason.ErrPolicyDenied) ||
		!strings.Contains(err.Error(), "strict policy: delete → deny") {
		t.Fatalf("strict: %v", err)
	}
}

// TestAgentOverridesPreApprove: guard.agent_overrides pre-approves action
// types for the tool calls that agent makes (Request.viaAgent, set by
// run_tool): delete's prompt becomes allow for research-agent's calls
// only; a deny, strict mode and a per-tool override still decide.
func TestAgentOverridesPreApprove(t *testing.T) {
	cases := []struct {
		name, agent string
		edit        map[string]string
		want        string
	}{
		{"the agent's call", "research-agent", nil, "allow"},
		{"a call from the CLI", "", nil, "policy_prompt"},
		{"another agent's call", "other-agent", nil, "policy_prompt"},
		{"a deny stays", "research-agent", map[string]string{"guard.delete": "deny"}, "policy_denied: default policy: delete → deny"},
		{"strict ignores it", "research-agent", map[string]string{"guard.strict": "true"}, "policy_denied: strict policy"},
		{"a tool override's prompt stays", "research-agent",
			map[string]string{"guard.tool_overrides.acme-pack/purge_cache": `{"delete":"prompt"}`}, "policy_prompt: tool override"},
		{"an action type it does not list keeps its prompt", "research-agent",
			map[string]string{"guard.network_egress": "prompt"}, "policy_prompt: default policy: network_egress → prompt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newHome(t)
			ran := sdkGuardPipeline(t)
			setConfig(t, k, "guard.agent_overrides", `{"research-agent":{"pre_approved_actions":["delete","read"]}}`)
			for key, v := range tc.edit {
				setConfig(t, k, key, v)
			}
			res, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "purge_cache", viaAgent: tc.agent})
			got := outcome(res, err)
			if !matches(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if tc.want == "allow" {
				if chain := decisionChain(t, k); *ran != 1 || res.Decision != "allow" || chain != "policy:allow,pre_approved:research-agent" {
					t.Fatalf("ran %d, decision record's guard chain %q", *ran, chain)
				}
			} else if *ran != 0 {
				t.Fatal("a refused call ran")
			}
		})
	}
}

// TestRunToolCarriesTheAgent: a run_tool of an agent's session
// (services.RunTool, what the agent executor calls) reaches the nested
// pipeline with the agent's pre-approvals.
func TestRunToolCarriesTheAgent(t *testing.T) {
	m := testAgentManifest()
	m.ToolAccess.AllowedPackages = []string{"acme-pack"}
	st := agentState(t, m, nil)
	setConfig(t, st.k, "guard.agent_overrides", `{"test-agent":{"pre_approved_actions":["delete"]}}`)
	ran := sdkGuardPipeline(t)
	svc := &services{st: st}
	// The stand-in execution returns no result: the tool "failed", but it
	// ran, no refusal code.
	res, err := svc.RunTool(context.Background(), "acme-pack", "purge_cache", json.RawMessage(`{}`))
	if err != nil || res.Decision != "allow" || *ran != 1 {
		t.Fatalf("pre-approved call: %+v %v, ran %d", res, err, *ran)
	}
	// The same call from the CLI is a prompt, a refusal when not
	// interactive.
	if _, err := st.k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "purge_cache"}); !errors.Is(err, reason.ErrPolicyPrompt) {
		t.Fatalf("CLI call: %v", err)
	}
	setConfig(t, st.k, "guard.agent_overrides", `{}`)
	res, err = svc.RunTool(context.Background(), "acme-pack", "purge_cache", json.RawMessage(`{}`))
	if !errors.Is(err, reason.ErrPolicyPrompt) || res.Code != "policy_prompt" || *ran != 1 {
		t.Fatalf("without the pre-approval: %+v %v, ran %d", res, err, *ran)
	}
}

// TestSDKRateLimits: the AgentNode SDK's guard.rate_limits keys, and its
// "default" entry for packages without their own; what an entry leaves out
// is the built-in limit of the package's type.
func TestSDKRateLimits(t *testing.T) {
	cases := []struct {
		name, pkgType string
		limits        string
		want          ratelimit.Limit
	}{
		{"own entry", "toolpack", `{"acme-pack":{"calls_per_minute":5,"calls_per_hour":50,"burst_size":2}}`, ratelimit.Limit{Burst: 2, PerMinute: 5, PerHour: 50}},
		{"partial entry", "toolpack", `{"acme-pack":{"burst_size":3}}`, ratelimit.Limit{Burst: 3, PerMinute: 60, PerHour: 1000}},
		{"partial entry of an agent", "agent", `{"acme-pack":{"calls_per_hour":7}}`, ratelimit.Limit{Burst: 20, PerMinute: 120, PerHour: 7}},
		{"default entry", "toolpack", `{"default":{"calls_per_minute":4}}`, ratelimit.Limit{Burst: 10, PerMinute: 4, PerHour: 1000}},
		{"own entry beats default", "toolpack", `{"default":{"calls_per_minute":4},"acme-pack":{"burst_size":2}}`,
			ratelimit.Limit{Burst: 2, PerMinute: 60, PerHour: 1000}},
		{"agentnode's form as default", "agent", `{"default":{"per_minute":3,"per_hour":30,"burst":1}}`, ratelimit.Limit{Burst: 1, PerMinute: 3, PerHour: 30}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newHome(t)
			setConfig(t, k, "guard.rate_limits", tc.limits)
			set, err := loadSettings(k.configPath(), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := effectiveRateLimit(set, "acme-pack", tc.pkgType); got != tc.want {
				t.Fatalf("limit %+v, want %+v", got, tc.want)
			}
		})
	}
	// Enforced: two calls pass a burst_size of 2 within the same second;
	// the third is rate_limited.
	k := newHome(t)
	ran := rateLimitPipeline(t, k, "toolpack")
	setConfig(t, k, "guard.rate_limits", `{"default":{"burst_size":2}}`)
	for i := range 2 {
		if _, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "t"}); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	if _, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "t"}); !errors.Is(err, reason.ErrRateLimited) ||
		!strings.Contains(err.Error(), "2 per second") || *ran != 2 {
		t.Fatalf("third call: %v (ran %d)", err, *ran)
	}
}
