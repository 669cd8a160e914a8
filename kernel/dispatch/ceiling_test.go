package dispatch

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/policy"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
)

// ceilingPipeline is the real config stage → a stand-in for the package
// stages (a curated package declaring perms, one read tool) → the real
// policy stage, with execution replaced by a counter.
func ceilingPipeline(t *testing.T, perms manifest.Permissions) *int {
	t.Helper()
	withStages(t,
		stage{name: "config", code: reason.ConfigInvalid, run: stageConfig},
		stage{name: "package", code: reason.ArtifactMismatch, run: func(_ context.Context, st *state) error {
			st.pkg = &store.Package{ID: "acme-pack", Version: "1.0.0",
				Manifest: &manifest.Manifest{PackageID: "acme-pack", PackageType: "toolpack", Runtime: "exec", Permissions: perms}}
			st.tool = &manifest.Tool{Name: "search", ActionType: "read"}
			st.actions = policy.Classify(policy.ClassifyInput{ToolName: "search", DeclaredAction: "read",
				NetworkLevel: perms.Network.Level, CodeExecutionLevel: perms.CodeExecution.Level})
			st.res.Trust, st.res.Placement = "curated", PlacementHost
			return nil
		}},
		stage{name: "policy", code: reason.PolicyDenied, run: stagePolicy})
	ran := 0
	saved := executeStage
	executeStage = stage{name: "execute", code: reason.PluginUnavailable, run: func(context.Context, *state) error {
		ran++
		return nil
	}}
	t.Cleanup(func() { executeStage = saved })
	return &ran
}

func perms(network, filesystem, code string) manifest.Permissions {
	return manifest.Permissions{
		Network:       manifest.NetworkPermission{Level: network},
		Filesystem:    manifest.Level{Level: filesystem},
		CodeExecution: manifest.Level{Level: code},
	}
}

// TestCeilingFromConfig: guard.max_permissions reaches the policy engine; a
// package above it is refused with policy_denied naming the permission, the
// declared level and the ceiling, audited, and never executed.
func TestCeilingFromConfig(t *testing.T) {
	cases := []struct {
		name    string
		ceiling map[string]string // guard.max_permissions.KEY → value
		perms   manifest.Permissions
		deny    []string // substrings of the refusal; nil: allowed
	}{
		{"unset allows everything", nil, perms("unrestricted", "any", "shell"), nil},
		{"network none refuses unrestricted", map[string]string{"network": "none"}, perms("unrestricted", "temp", "none"),
			[]string{`network level "unrestricted"`, `allowed "none"`, "guard.max_permissions"}},
		{"network restricted refuses unrestricted", map[string]string{"network": "restricted"}, perms("unrestricted", "temp", "none"),
			[]string{`network level "unrestricted"`, `allowed "restricted"`}},
		{"network restricted allows restricted", map[string]string{"network": "restricted"}, perms("restricted", "temp", "none"), nil},
		{"network unrestricted allows unrestricted", map[string]string{"network": "unrestricted"}, perms("unrestricted", "temp", "none"), nil},
		{"network none allows none", map[string]string{"network": "none"}, perms("none", "any", "shell"), nil},
		{"filesystem", map[string]string{"filesystem": "workspace_read"}, perms("none", "workspace_write", "none"),
			[]string{`filesystem level "workspace_write"`, `allowed "workspace_read"`}},
		{"filesystem at the ceiling", map[string]string{"filesystem": "workspace_read"}, perms("none", "workspace_read", "none"), nil},
		{"code execution", map[string]string{"code_execution": "limited_subprocess"}, perms("none", "temp", "shell"),
			[]string{`code_execution level "shell"`, `allowed "limited_subprocess"`}},
		{"all three, code execution above", map[string]string{"network": "restricted", "filesystem": "any", "code_execution": "none"},
			perms("restricted", "any", "limited_subprocess"), []string{"code_execution", `"limited_subprocess"`, `allowed "none"`}},
		{"a limit on one kind leaves the others open", map[string]string{"code_execution": "shell"}, perms("unrestricted", "any", "shell"), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newHome(t)
			ran := ceilingPipeline(t, tc.perms)
			for key, v := range tc.ceiling {
				setConfig(t, k, "guard.max_permissions."+key, v)
			}
			res, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "search"})
			if tc.deny == nil {
				if err != nil || res.Decision != "allow" || *ran != 1 {
					t.Fatalf("want allowed and run: err=%v decision=%s ran=%d", err, res.Decision, *ran)
				}
				return
			}
			if !errors.Is(err, reason.ErrPolicyDenied) || res.Code != string(reason.PolicyDenied) {
				t.Fatalf("err = %v (code %q), want policy_denied", err, res.Code)
			}
			if *ran != 0 || res.Ran {
				t.Fatal("a package above the ceiling was executed")
			}
			for _, w := range tc.deny {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q lacks %q", err, w)
				}
			}
			rec := lastRecord(t, k)
			if rec.Event != "decision" || rec.Decision != "deny" || rec.Code != string(reason.PolicyDenied) ||
				!strings.Contains(rec.Reason, tc.deny[0]) || strings.Join(rec.GuardChain, ",") != "policy:deny" {
				t.Errorf("audit record = %+v", rec)
			}
		})
	}
}

// TestCeilingBeatsOverridesAndStrict: no tool override lifts a permission
// refusal, and strict mode keeps it.
func TestCeilingBeatsOverridesAndStrict(t *testing.T) {
	k := newHome(t)
	ran := ceilingPipeline(t, perms("unrestricted", "temp", "none"))
	setConfig(t, k, "guard.max_permissions.network", "none")
	setConfig(t, k, "guard.tool_overrides.acme-pack/search", "allow")
	if _, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "search"}); !errors.Is(err, reason.ErrPolicyDenied) {
		t.Fatalf("override: err = %v", err)
	}
	setConfig(t, k, "guard.strict", "true")
	if _, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "search"}); !errors.Is(err, reason.ErrPolicyDenied) {
		t.Fatalf("strict: err = %v", err)
	}
	if *ran != 0 {
		t.Fatal("executed above the ceiling")
	}
}

// TestCeilingDryRunReportsDeny: guard check / run --dry-run shows the same
// refusal without auditing.
func TestCeilingDryRunReportsDeny(t *testing.T) {
	k := newHome(t)
	ceilingPipeline(t, perms("unrestricted", "temp", "none"))
	setConfig(t, k, "guard.max_permissions.network", "restricted")
	res, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "search", DryRun: true})
	if !errors.Is(err, reason.ErrPolicyDenied) || res.Decision != "deny" || !strings.Contains(res.Reason, `above the allowed "restricted"`) {
		t.Fatalf("dry run: %+v, %v", res, err)
	}
}

// TestGuardSettingsShowCeiling: the settings `guard policy` reports carry
// the ceiling the policy stage decides with.
func TestGuardSettingsShowCeiling(t *testing.T) {
	k := newHome(t)
	set, err := k.GuardSettings()
	if err != nil {
		t.Fatal(err)
	}
	if set.Ceiling != (policy.Permissions{}) {
		t.Errorf("unset ceiling shown as %+v", set.Ceiling)
	}
	setConfig(t, k, "guard.max_permissions", `{"network":"none","code_execution":"limited_subprocess"}`)
	if set, err = k.GuardSettings(); err != nil {
		t.Fatal(err)
	}
	if want := (policy.Permissions{Network: "none", CodeExecution: "limited_subprocess"}); set.Ceiling != want {
		t.Errorf("Ceiling = %+v, want %+v", set.Ceiling, want)
	}
}

// TestCeilingLaddersAgree: every level config accepts is one the policy
// engine ranks, in the same order (a level the engine did not know would
// deny everything, fail closed, but silently differ from the docs).
func TestCeilingLaddersAgree(t *testing.T) {
	ladders := []struct {
		levels []string
		set    func(p *policy.Permissions, v string)
	}{
		{config.NetworkLevels, func(p *policy.Permissions, v string) { p.Network = v }},
		{config.FilesystemLevels, func(p *policy.Permissions, v string) { p.Filesystem = v }},
		{config.CodeExecutionLevels, func(p *policy.Permissions, v string) { p.CodeExecution = v }},
	}
	for _, l := range ladders {
		for i, c := range l.levels {
			for j, d := range l.levels {
				var declared, ceiling policy.Permissions
				l.set(&declared, d)
				l.set(&ceiling, c)
				got := policy.Decide(policy.Input{Package: "p", Tool: "t", Actions: []policy.Action{policy.Read},
					Permissions: declared, Ceiling: ceiling})
				if denied := got.Rule == policy.RulePermission; denied != (j > i) {
					t.Errorf("declared %q under ceiling %q: permission deny = %v (%s)", d, c, denied, got.Reason())
				}
			}
		}
	}
}
