package policy

import (
	"fmt"
)

// Input is everything Decide looks at.
type Input struct {
	Package    string
	Tool       string
	Actions    []Action // from Classify
	TrustLevel string   // the package version's trust tier
	Env        Env
	// Strict selects the strict table; Global, Overrides and PreApproved
	// are then ignored.
	Strict bool
	// Global is the configured policy per action (config guard.<action>);
	// missing actions fall back to the default table.
	Global map[Action]Verdict
	// Overrides maps "package/tool" to a verdict (guard.tool_overrides):
	// the verdict of the whole call.
	Overrides map[string]Verdict
	// ActionOverrides maps "package/tool" to a verdict per action type
	// (guard.tool_overrides in the AgentNode SDK's object form): each
	// action type of the call with an entry takes that verdict instead of
	// the global policy and any pre-approval; the others follow the policy.
	// A key also in Overrides is decided by Overrides.
	ActionOverrides map[string]map[Action]Verdict
	// PreApproved are the action types pre-approved for the calling agent
	// (its guard.agent_overrides entry; for call_llm, the run's opt-in): a
	// prompt for one of them becomes allow; a deny stays.
	PreApproved []Action
	// Permissions are the levels the package declares; Ceiling the highest
	// levels allowed (an empty field: no limit for that kind).
	Permissions Permissions
	Ceiling     Permissions
	// PromptCeiling is the highest levels that run without asking: a
	// declared level above it raises an allow to prompt (an empty field:
	// no limit for that kind). It comes from the AgentNode SDK's
	// permissions.* in the config (prompt, sandboxed).
	PromptCeiling Permissions
}

// Rule names the step of Decide that decided.
type Rule string

// The rules, in the order Decide applies them.
const (
	RuleInternal    Rule = "internal"
	RuleCritical    Rule = "critical"
	RulePermission  Rule = "permission"
	RuleOverride    Rule = "override"
	RulePreApproved Rule = "pre_approved"
	RuleGlobal      Rule = "global"
)

// Escalation names why an allow was raised to prompt ("" for none).
type Escalation string

// Escalations (see the package documentation).
const (
	EscalationHighBand Escalation = "high_risk_band"
	EscalationRoot     Escalation = "root"
	EscalationSecrets  Escalation = "secrets_with_network"
	// EscalationPermission: a declared permission level above
	// Input.PromptCeiling.
	EscalationPermission Escalation = "permission"
)

// internal error kinds of a Decision.
const (
	internalNone = iota
	internalNoActions
	internalInvalidAction
)

// Decision is the result of Decide. Reason explains it.
type Decision struct {
	Verdict    Verdict
	Score      int
	Band       Band
	Rule       Rule
	Action     Action // the decisive action type (RuleGlobal, RulePreApproved)
	Escalation Escalation
	Strict     bool
	Actions    ActionSet

	pkg, tool string
	internal  int
	bad       Action // the invalid action type (internalInvalidAction)
	override  Verdict
	permKind  int
	permProb  permProblem
	declared  string
	ceiling   string
}

// Decide applies Guard's policy to one tool call; see the package
// documentation for the order of the steps. It does not allocate.
func Decide(in Input) Decision {
	s := SetOf(in.Actions)
	d := Decision{pkg: in.Package, tool: in.Tool, Actions: s, Strict: in.Strict}
	d.Score = riskScore(s, in.TrustLevel, in.Env)
	d.Band = BandOf(d.Score)
	switch {
	case s == 0:
		return d.deny(RuleInternal, internalNoActions)
	case s.Invalid():
		for _, a := range in.Actions {
			if bit(a) == bitInvalid {
				d.bad = a
				break
			}
		}
		return d.deny(RuleInternal, internalInvalidAction)
	case d.Band == Critical:
		return d.deny(RuleCritical, internalNone)
	}
	if kind, p := checkCeiling(in.Permissions, in.Ceiling); p != permOK {
		d.permKind, d.permProb = kind, p
		d.declared, d.ceiling = pick(in.Permissions, kind), pick(in.Ceiling, kind)
		return d.deny(RulePermission, internalNone)
	}
	var perAction map[Action]Verdict
	if !in.Strict && (len(in.Overrides) > 0 || len(in.ActionOverrides) > 0) {
		var buf [192]byte
		key := append(buf[:0], in.Package...)
		key = append(key, '/')
		key = append(key, in.Tool...)
		if v, ok := in.Overrides[string(key)]; ok {
			d.Rule, d.override, d.Verdict = RuleOverride, v, normal(v)
			return d
		}
		perAction = in.ActionOverrides[string(key)]
	}
	tbl, pre := &defaultTable, ActionSet(0)
	if in.Strict {
		tbl = &strictTable
	} else {
		pre = SetOf(in.PreApproved)
	}
	verdict, decisive, lifted, overridden := Allow, Action(""), ActionSet(0), ActionSet(0)
	var decisiveRaw Verdict
	for i := range numActions {
		if s&(1<<i) == 0 {
			continue
		}
		a, v := Actions[i], tbl[i]
		raw, over := perAction[a]
		switch {
		case over:
			// The user's decision for this action type of this tool: above
			// the global policy and any pre-approval.
			v, overridden = raw, overridden|1<<i
		case !in.Strict:
			if g, ok := in.Global[a]; ok {
				v = g
			}
		}
		v = normal(v)
		if !over && v == Prompt && pre&(1<<i) != 0 {
			v, lifted = Allow, lifted|1<<i
		}
		if decisive == "" || rank(v) > rank(verdict) {
			verdict, decisive, decisiveRaw = v, a, raw
		}
	}
	d.Verdict, d.Action, d.Rule = verdict, decisive, RuleGlobal
	switch {
	case verdict != Allow && overridden.Has(decisive):
		d.Rule, d.override = RuleOverride, decisiveRaw
	case s&^overridden == 0:
		// Every action type of the call has its override: the user decided
		// the whole call, as with a single verdict, and nothing raises it.
		d.Rule, d.override, d.Action = RuleOverride, verdict, ""
		return d
	case verdict == Allow && lifted != 0:
		d.Rule = RulePreApproved
		d.Action = lifted.first()
	}
	// Escalation looks only at the action types the policy decided: an
	// action type the user overrode for this tool is not raised.
	if verdict == Allow && s&^overridden&highRisk != 0 {
		switch {
		case d.Band == High:
			d.Escalation = EscalationHighBand
		case in.Env.Root:
			d.Escalation = EscalationRoot
		case in.Env.SecretsPresent && s.Has(NetworkEgress):
			d.Escalation = EscalationSecrets
		}
		if d.Escalation != "" {
			d.Verdict = Prompt
		}
	}
	if d.Verdict == Allow {
		if kind, p := checkCeiling(in.Permissions, in.PromptCeiling); p != permOK {
			d.permKind, d.permProb = kind, p
			d.declared, d.ceiling = pick(in.Permissions, kind), pick(in.PromptCeiling, kind)
			d.Escalation, d.Verdict = EscalationPermission, Prompt
		}
	}
	return d
}

// PermissionKind names the permission kind (network, filesystem,
// code_execution) a RulePermission deny or an EscalationPermission prompt
// is about, else "".
func (d Decision) PermissionKind() string {
	if d.permKind == 0 {
		return ""
	}
	return permNames[d.permKind]
}

func (d Decision) deny(rule Rule, internal int) Decision {
	d.Verdict, d.Rule, d.internal = Deny, rule, internal
	return d
}

// normal maps anything but allow and prompt to deny (fail closed).
func normal(v Verdict) Verdict {
	if v == Allow || v == Prompt {
		return v
	}
	return Deny
}

// first returns the first action of s in Actions order.
func (s ActionSet) first() Action {
	for i := range numActions {
		if s&(1<<i) != 0 {
			return Actions[i]
		}
	}
	return ""
}

// Reason explains the decision in one line for people (error messages,
// audit). It is built on demand; Decide itself does not format anything.
func (d Decision) Reason() string {
	var why string
	switch d.Rule {
	case RuleInternal:
		switch d.internal {
		case internalNoActions:
			why = "no action type: nothing to decide on"
		case internalInvalidAction:
			why = fmt.Sprintf("unrecognised action type %q", string(d.bad))
		default:
			why = "internal error"
		}
		return why
	case RuleCritical:
		return fmt.Sprintf("risk score %d is critical (%s); nothing overrides it", d.Score, d.Actions)
	case RulePermission:
		name := permNames[d.permKind]
		switch d.permProb {
		case permAbove:
			return fmt.Sprintf("the package declares %s level %q, above the allowed %q", name, d.declared, d.ceiling)
		case permBadDeclared:
			return fmt.Sprintf("the package declares no known %s level (%q) and %s is limited to %q", name, d.declared, name, d.ceiling)
		default:
			return fmt.Sprintf("the %s ceiling %q is not a %s level", name, d.ceiling, name)
		}
	case RuleOverride:
		name := d.pkg + "/" + d.tool
		if d.Action != "" {
			name += " for " + string(d.Action)
		}
		if d.override != d.Verdict {
			return fmt.Sprintf("tool override %s is not a verdict (%q): deny", name, string(d.override))
		}
		return fmt.Sprintf("tool override %s: %s (risk %d, %s)", name, d.Verdict, d.Score, d.Band)
	case RulePreApproved:
		why = fmt.Sprintf("%s pre-approved by the agent → allow (risk %d, %s)", d.Action, d.Score, d.Band)
	default:
		mode := "default"
		if d.Strict {
			mode = "strict"
		}
		if d.Escalation != "" {
			why = fmt.Sprintf("%s policy: %s → allow (risk %d, %s)", mode, d.Action, d.Score, d.Band)
		} else {
			why = fmt.Sprintf("%s policy: %s → %s (risk %d, %s)", mode, d.Action, d.Verdict, d.Score, d.Band)
		}
	}
	switch d.Escalation {
	case EscalationHighBand:
		why += "; raised to prompt: high-risk action with a high risk score"
	case EscalationRoot:
		why += "; raised to prompt: high-risk action while running as root"
	case EscalationSecrets:
		why += "; raised to prompt: high-risk action with network egress while secrets are in the environment"
	case EscalationPermission:
		name := permNames[d.permKind]
		if d.permProb == permAbove {
			why += fmt.Sprintf("; raised to prompt: the package declares %s level %q, above %q, which needs approval (permissions.%s)", name, d.declared, d.ceiling, name)
		} else {
			why += fmt.Sprintf("; raised to prompt: the package declares no known %s level (%q) (permissions.%s)", name, d.declared, name)
		}
	}
	return why
}
