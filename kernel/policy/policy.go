// Package policy is Guard's decision engine: it classifies a tool call into
// action types, applies the default or strict policy, per-tool overrides and
// the risk score, and returns allow, prompt or deny. It makes no I/O; rate
// limits, inspector plugins and the prompt itself are separate pipeline
// stages in kernel/dispatch.
package policy

import (
	"fmt"
	"sort"
	"strings"
)

// Action is an action type (AGENTNODE-FACTS.md, Guard).
type Action string

// The action types.
const (
	Read          Action = "read"
	Compute       Action = "compute"
	WriteLocal    Action = "write_local"
	WriteExternal Action = "write_external"
	Delete        Action = "delete"
	Execute       Action = "execute"
	CredentialUse Action = "credential_use"
	NetworkEgress Action = "network_egress"
	Unknown       Action = "unknown"
)

// Actions lists every action type.
var Actions = []Action{Read, Compute, WriteLocal, WriteExternal, Delete, Execute, CredentialUse, NetworkEgress, Unknown}

// Verdict is a Guard decision.
type Verdict string

// Verdicts, weakest first.
const (
	Allow  Verdict = "allow"
	Prompt Verdict = "prompt"
	Deny   Verdict = "deny"
)

// Stronger returns the stricter of a and b (deny > prompt > allow).
func Stronger(a, b Verdict) Verdict {
	if rank(a) >= rank(b) {
		return a
	}
	return b
}

func rank(v Verdict) int {
	switch v {
	case Allow:
		return 0
	case Prompt:
		return 1
	}
	return 2 // deny and anything unrecognised
}

// ParseVerdict accepts allow, prompt or deny.
func ParseVerdict(s string) (Verdict, error) {
	switch v := Verdict(s); v {
	case Allow, Prompt, Deny:
		return v, nil
	}
	return "", fmt.Errorf("invalid verdict %q (want allow, prompt or deny)", s)
}

// ClassifyInput is what classification looks at.
type ClassifyInput struct {
	ToolName           string
	DeclaredAction     string // the tool's action_type, may be empty
	NetworkLevel       string // none | restricted | unrestricted
	CodeExecutionLevel string // none or empty means no code execution
	Connector          bool
}

var prefixes = []struct {
	words  []string
	action Action
}{
	{[]string{"delete", "remove", "drop"}, Delete},
	{[]string{"send", "post", "email"}, WriteExternal},
	{[]string{"create", "write", "update"}, WriteLocal},
	{[]string{"get", "read", "list"}, Read},
	{[]string{"run", "exec", "eval", "shell"}, Execute},
	{[]string{"compute", "parse"}, Compute},
}

// Classify returns the action types of a tool call, sorted and unique. The
// declared action_type wins over the name heuristic; declared network adds
// network_egress, declared code execution adds execute, a connector adds
// credential_use.
func Classify(in ClassifyInput) []Action {
	set := map[Action]bool{}
	if in.DeclaredAction != "" {
		set[Action(in.DeclaredAction)] = true
	} else {
		set[classifyName(in.ToolName)] = true
	}
	if in.NetworkLevel != "" && in.NetworkLevel != "none" {
		set[NetworkEgress] = true
	}
	if in.CodeExecutionLevel != "" && in.CodeExecutionLevel != "none" {
		set[Execute] = true
	}
	if in.Connector {
		set[CredentialUse] = true
	}
	out := make([]Action, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func classifyName(name string) Action {
	n := strings.ToLower(name)
	for _, p := range prefixes {
		for _, w := range p.words {
			if strings.HasPrefix(n, w) {
				return p.action
			}
		}
	}
	return Unknown
}

// DefaultPolicy is AgentNode's default global policy.
var DefaultPolicy = map[Action]Verdict{
	Delete: Prompt, WriteExternal: Prompt, Execute: Prompt, CredentialUse: Prompt, Unknown: Prompt,
	NetworkEgress: Allow, WriteLocal: Allow, Read: Allow, Compute: Allow,
}

// StrictPolicy is AgentNode's strict global policy.
var StrictPolicy = map[Action]Verdict{
	Delete: Deny, WriteExternal: Deny, Execute: Deny, Unknown: Deny,
	CredentialUse: Prompt, WriteLocal: Prompt,
	NetworkEgress: Allow, Read: Allow, Compute: Allow,
}

// Env is the environment context of a decision.
type Env struct {
	CI             bool
	Interactive    bool
	SecretsPresent bool
	Root           bool
}

// Band is a risk band.
type Band string

// Risk bands.
const (
	Low      Band = "low"
	Medium   Band = "medium"
	High     Band = "high"
	Critical Band = "critical"
)

// Risk scores a call: +20 delete, +15 write_external, +15 execute, +10
// credential_use, +20 unverified (or unknown) trust with any high-risk action,
// +15 secrets present with network egress.
func Risk(actions []Action, trustLevel string, env Env) (int, Band) {
	has := map[Action]bool{}
	for _, a := range actions {
		has[a] = true
	}
	score := 0
	if has[Delete] {
		score += 20
	}
	if has[WriteExternal] {
		score += 15
	}
	if has[Execute] {
		score += 15
	}
	if has[CredentialUse] {
		score += 10
	}
	highRisk := has[Delete] || has[WriteExternal] || has[Execute] || has[CredentialUse]
	if highRisk && (trustLevel == "unverified" || trustLevel == "unknown" || trustLevel == "") {
		score += 20
	}
	if env.SecretsPresent && has[NetworkEgress] {
		score += 15
	}
	switch {
	case score >= 71:
		return score, Critical
	case score >= 46:
		return score, High
	case score >= 21:
		return score, Medium
	}
	return score, Low
}

// Input is everything Decide looks at.
type Input struct {
	Package    string
	Tool       string
	Actions    []Action
	TrustLevel string
	Env        Env
	Strict     bool
	// Global is the configured policy per action (config guard.<action>);
	// missing actions fall back to DefaultPolicy. Ignored when Strict.
	Global map[Action]Verdict
	// Overrides maps "package/tool" to a verdict (guard.tool_overrides).
	// Ignored when Strict.
	Overrides map[string]Verdict
}

// Decision is the result of Decide.
type Decision struct {
	Verdict Verdict
	Score   int
	Band    Band
	Reason  string
}

// Decide applies, in order: critical risk (always deny, nothing lifts it),
// the per-tool override, then the global policy (strictest verdict over all
// action types).
func Decide(in Input) Decision {
	score, band := Risk(in.Actions, in.TrustLevel, in.Env)
	if band == Critical {
		return Decision{Verdict: Deny, Score: score, Band: band,
			Reason: fmt.Sprintf("risk score %d is critical (%s)", score, joinActions(in.Actions))}
	}
	if !in.Strict {
		if v, ok := in.Overrides[in.Package+"/"+in.Tool]; ok {
			return Decision{Verdict: v, Score: score, Band: band,
				Reason: fmt.Sprintf("tool override %s/%s: %s", in.Package, in.Tool, v)}
		}
	}
	table := DefaultPolicy
	if in.Strict {
		table = StrictPolicy
	}
	if len(in.Actions) == 0 {
		return Decision{Verdict: Deny, Score: score, Band: band, Reason: "no action type: nothing to decide on"}
	}
	verdict, decisive := Allow, Action("")
	for _, a := range in.Actions {
		v, ok := table[a]
		if g, ok2 := in.Global[a]; ok2 && !in.Strict {
			v, ok = g, true
		}
		if !ok {
			v = Deny // an action type the table does not know
		}
		if decisive == "" || rank(v) > rank(verdict) {
			verdict, decisive = v, a
		}
	}
	mode := "default"
	if in.Strict {
		mode = "strict"
	}
	return Decision{Verdict: verdict, Score: score, Band: band,
		Reason: fmt.Sprintf("%s policy: %s → %s (risk %d, %s)", mode, decisive, verdict, score, band)}
}

func joinActions(as []Action) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = string(a)
	}
	return strings.Join(s, ", ")
}

// Secret-looking environment variable name prefixes and CI markers.
var (
	secretPrefixes = []string{"AWS_", "OPENAI_", "STRIPE_", "GCP_", "AZURE_", "ANTHROPIC_", "DATABASE_URL", "SECRET"}
	ciVars         = []string{"CI", "GITHUB_ACTIONS", "GITLAB_CI", "CIRCLECI", "JENKINS_URL", "TRAVIS"}
)

// EnvFrom derives the secrets-present and CI flags from an environment
// (os.Environ form). Interactive and Root are set by the caller.
func EnvFrom(environ []string) Env {
	var e Env
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		for _, p := range secretPrefixes {
			if strings.HasPrefix(k, p) && v != "" {
				e.SecretsPresent = true
			}
		}
		for _, c := range ciVars {
			if k == c && truthy(v) {
				e.CI = true
			}
		}
	}
	return e
}

func truthy(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "0", "false", "no", "off":
		return false
	}
	return true
}
