package policy

import (
	"fmt"
	"strings"
)

// Action is an action type (the guard.<action> keys of specs/config.md).
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

// Bit positions of the action types in an ActionSet; the order is that of
// Actions. bitInvalid marks an action string that is none of them.
const (
	bitRead = iota
	bitCompute
	bitWriteLocal
	bitWriteExternal
	bitDelete
	bitExecute
	bitCredentialUse
	bitNetworkEgress
	bitUnknown
	numActions
	bitInvalid = 15
)

// ActionSet is a set of action types as a bitset.
type ActionSet uint16

// highRisk are the action types that count as high risk (risk score and
// environment escalation).
const highRisk = ActionSet(1<<bitDelete | 1<<bitWriteExternal | 1<<bitExecute | 1<<bitCredentialUse)

// bit returns the bit of a, or bitInvalid.
func bit(a Action) uint {
	switch a {
	case Read:
		return bitRead
	case Compute:
		return bitCompute
	case WriteLocal:
		return bitWriteLocal
	case WriteExternal:
		return bitWriteExternal
	case Delete:
		return bitDelete
	case Execute:
		return bitExecute
	case CredentialUse:
		return bitCredentialUse
	case NetworkEgress:
		return bitNetworkEgress
	case Unknown:
		return bitUnknown
	}
	return bitInvalid
}

// SetOf returns the set of actions. A string that is not an action type
// puts the set's invalid marker (see ActionSet.Invalid).
func SetOf(actions []Action) ActionSet {
	var s ActionSet
	for _, a := range actions {
		s |= 1 << bit(a)
	}
	return s
}

// Has reports whether a is in s.
func (s ActionSet) Has(a Action) bool {
	b := bit(a)
	return b != bitInvalid && s&(1<<b) != 0
}

// Invalid reports whether s was built from a string that is not an action
// type.
func (s ActionSet) Invalid() bool { return s&(1<<bitInvalid) != 0 }

// List returns the valid actions of s in name order.
func (s ActionSet) List() []Action {
	var out []Action
	for _, a := range sortedActions {
		if s.Has(a) {
			out = append(out, a)
		}
	}
	return out
}

// String lists the actions of s in name order, comma separated.
func (s ActionSet) String() string {
	var b strings.Builder
	for _, a := range sortedActions {
		if s.Has(a) {
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			b.WriteString(string(a))
		}
	}
	if s.Invalid() {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(invalid)")
	}
	return b.String()
}

// sortedActions is Actions in name order (Classify's output order).
var sortedActions = []Action{Compute, CredentialUse, Delete, Execute, NetworkEgress, Read, Unknown, WriteExternal, WriteLocal}

// Verdict is a Guard decision.
type Verdict string

// Verdicts, weakest first.
const (
	Allow  Verdict = "allow"
	Prompt Verdict = "prompt"
	Deny   Verdict = "deny"
)

// Stronger returns the stricter of a and b (deny > prompt > allow; anything
// unrecognised counts as deny).
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
	Connector          bool   // the package declares a connector
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

// Classify returns the action types of a tool call, sorted by name and
// unique. The declared action_type wins over the name heuristic (a declared
// string that is not an action type is kept as it is, and Decide denies
// it); declared network adds network_egress, declared code execution adds
// execute, a connector adds credential_use.
func Classify(in ClassifyInput) []Action {
	var s ActionSet
	var invalid Action
	switch {
	case in.DeclaredAction == "":
		s |= 1 << bit(classifyName(in.ToolName))
	case bit(Action(in.DeclaredAction)) == bitInvalid:
		invalid = Action(in.DeclaredAction)
	default:
		s |= 1 << bit(Action(in.DeclaredAction))
	}
	if in.NetworkLevel != "" && in.NetworkLevel != "none" {
		s |= 1 << bitNetworkEgress
	}
	if in.CodeExecutionLevel != "" && in.CodeExecutionLevel != "none" {
		s |= 1 << bitExecute
	}
	if in.Connector {
		s |= 1 << bitCredentialUse
	}
	out := s.List()
	if invalid != "" {
		out = append(out, invalid)
	}
	return out
}

func classifyName(name string) Action {
	for _, p := range prefixes {
		for _, w := range p.words {
			if len(name) >= len(w) && strings.EqualFold(name[:len(w)], w) {
				return p.action
			}
		}
	}
	return Unknown
}
