package policy

import (
	"slices"
	"strings"
	"testing"
)

// fuzzInput decodes the fuzzer's numbers into an Input: actionBits has one
// bit per action type (in Actions order) and bit 15 for an invalid one;
// globalBits two bits per action (0 unset, 1 allow, 2 prompt, 3 deny);
// preBits one bit per pre-approved action; permBits three bits per
// permission kind for the declared level and three for the ceiling (an
// index into the kind's levels, then "" and a level no ladder has). An
// override "per:…" is the object form (Input.ActionOverrides), one byte per
// action type.
func fuzzInput(actionBits uint16, trust string, envBits uint8, strict bool, override string,
	globalBits uint32, preBits uint16, permBits uint32) Input {
	in := Input{Package: "p", Tool: "t", TrustLevel: trust, Strict: strict,
		Env: Env{CI: envBits&1 != 0, Interactive: envBits&2 != 0, SecretsPresent: envBits&4 != 0, Root: envBits&8 != 0}}
	in.Actions = actionsOf(actionBits)
	if actionBits&(1<<15) != 0 {
		in.Actions = append(in.Actions, "bogus")
	}
	switch per, ok := strings.CutPrefix(override, "per:"); {
	case ok:
		// The object form: the i-th byte is Actions[i]'s verdict (a
		// allow, p prompt, d deny, - none, anything else as written).
		m := map[Action]Verdict{}
		for i := 0; i < len(per) && i < len(Actions); i++ {
			switch per[i] {
			case 'a':
				m[Actions[i]] = Allow
			case 'p':
				m[Actions[i]] = Prompt
			case 'd':
				m[Actions[i]] = Deny
			case '-':
			default:
				m[Actions[i]] = Verdict(per[i : i+1])
			}
		}
		in.ActionOverrides = map[string]map[Action]Verdict{"p/t": m}
	case override != "-":
		in.Overrides = map[string]Verdict{"p/t": Verdict(override)}
	}
	in.Global = map[Action]Verdict{}
	for i, a := range Actions {
		switch (globalBits >> (2 * i)) & 3 {
		case 1:
			in.Global[a] = Allow
		case 2:
			in.Global[a] = Prompt
		case 3:
			in.Global[a] = Deny
		}
	}
	in.PreApproved = actionsOf(preBits)
	ladders := [3][]string{
		{"none", "restricted", "unrestricted"},
		{"none", "temp", "workspace_read", "workspace_write", "any"},
		{"none", "limited_subprocess", "shell"},
	}
	level := func(kind int, n uint32) string {
		l := ladders[kind]
		switch i := int(n % uint32(len(l)+2)); {
		case i < len(l):
			return l[i]
		case i == len(l):
			return ""
		}
		return "bogus"
	}
	in.Permissions = Permissions{level(0, permBits&7), level(1, permBits>>3&7), level(2, permBits>>6&7)}
	in.Ceiling = Permissions{level(0, permBits>>9&7), level(1, permBits>>12&7), level(2, permBits>>15&7)}
	return in
}

func actionsOf(bits uint16) []Action {
	var out []Action
	for i, a := range Actions {
		if bits&(1<<i) != 0 {
			out = append(out, a)
		}
	}
	return out
}

// FuzzDecide checks the engine's invariants on arbitrary inputs: it never
// panics; the verdict is allow, prompt or deny and explained; critical
// always denies whatever the overrides, globals and pre-approvals; strict
// mode ignores overrides, guard.<action> and pre-approvals; an override
// decides unless something stronger did; escalation only turns allow into
// prompt; pre-approvals never lift a deny; and adding an action type to a
// denied call never weakens the deny. Seeds: testdata/fuzz/FuzzDecide.
func FuzzDecide(f *testing.F) {
	f.Add(uint16(1<<bitRead), "trusted", uint8(0), false, "-", uint32(0), uint16(0), uint32(0))
	f.Add(uint16(1<<bitRead|1<<bitDelete|1<<bitNetworkEgress), "verified", uint8(8), false, "per:pa-d-x-a", uint32(0), uint16(0x1FF), uint32(0))
	f.Add(uint16(1<<bitDelete|1<<bitExecute|1<<bitWriteExternal|1<<bitCredentialUse), "unverified", uint8(4), false,
		"allow", uint32(0xFFFF), uint16(0x1FF), uint32(0))
	f.Fuzz(func(t *testing.T, actionBits uint16, trust string, envBits uint8, strict bool, override string,
		globalBits uint32, preBits uint16, permBits uint32) {
		in := fuzzInput(actionBits, trust, envBits, strict, override, globalBits, preBits, permBits)
		d := Decide(in)
		if d.Verdict != Allow && d.Verdict != Prompt && d.Verdict != Deny {
			t.Fatalf("verdict %q", d.Verdict)
		}
		if d.Reason() == "" {
			t.Fatal("no reason")
		}
		score, band := Risk(in.Actions, in.TrustLevel, in.Env)
		if d.Score != score || d.Band != band || BandOf(d.Score) != d.Band {
			t.Fatalf("score %d %s, Risk says %d %s", d.Score, d.Band, score, band)
		}
		if d.Band == Critical && d.Verdict != Deny {
			t.Fatalf("critical %d not denied: %s", d.Score, d.Reason())
		}
		if d.Escalation != "" && d.Verdict != Prompt {
			t.Fatalf("escalation %s gave %s", d.Escalation, d.Verdict)
		}
		bare := in
		bare.Overrides, bare.ActionOverrides, bare.Global, bare.PreApproved = nil, nil, nil, nil
		if strict {
			if b := Decide(bare); b.Verdict != d.Verdict || b.Rule != d.Rule {
				t.Fatalf("strict depends on overrides/globals/pre-approvals: %s (%s) vs %s (%s)",
					d.Verdict, d.Reason(), b.Verdict, b.Reason())
			}
		} else if in.Overrides != nil && d.Rule != RuleInternal && d.Rule != RuleCritical && d.Rule != RulePermission {
			if d.Rule != RuleOverride || d.Verdict != normal(in.Overrides["p/t"]) {
				t.Fatalf("override %q not applied: %s by %s", override, d.Verdict, d.Rule)
			}
		}
		// An action type of the call whose own override is not allow or
		// prompt denies the call.
		for a, v := range in.ActionOverrides["p/t"] {
			if !strict && slices.Contains(in.Actions, a) && normal(v) == Deny && d.Verdict != Deny {
				t.Fatalf("override %s=%q of the call not applied: %s (%s)", a, v, d.Verdict, d.Reason())
			}
		}
		noPre := in
		noPre.PreApproved = nil
		if Decide(noPre).Verdict == Deny && d.Verdict != Deny {
			t.Fatalf("a pre-approval lifted a deny: %s", d.Reason())
		}
		if d.Verdict == Deny && len(in.Actions) > 0 {
			for _, a := range Actions {
				more := in
				more.Actions = append(append([]Action(nil), in.Actions...), a)
				if m := Decide(more); m.Verdict != Deny {
					t.Fatalf("adding %s weakened deny (%s) to %s (%s)", a, d.Reason(), m.Verdict, m.Reason())
				}
			}
		}
	})
}
