# Guard's policy (README.md, Guard; specs/config.md) in Rego, equivalent to
# kernel/policy.Decide for calls without pre-approvals, permission ceilings or
# environment escalation: default and strict tables, guard.<action> from the
# config (ignored when strict), per-tool overrides (ignored when strict), and
# the risk score whose critical band always denies.
package agentnode.guard

weights := {"delete": 20, "write_external": 15, "execute": 15, "credential_use": 10}

default_table := {
	"read": "allow", "compute": "allow", "write_local": "allow", "network_egress": "allow",
	"write_external": "prompt", "delete": "prompt", "execute": "prompt", "credential_use": "prompt",
	"unknown": "prompt",
}

strict_table := {
	"read": "allow", "compute": "allow", "network_egress": "allow",
	"credential_use": "prompt", "write_local": "prompt",
	"write_external": "deny", "delete": "deny", "execute": "deny", "unknown": "deny",
}

rank := {"allow": 0, "prompt": 1, "deny": 2}

verdicts := ["allow", "prompt", "deny"]

actions := {a | some a in input.actions}

high_risk if {
	some a in actions
	weights[a]
}

low_trust if not input.trust in {"verified", "trusted", "curated"}

trust_points := 20 if {
	high_risk
	low_trust
} else := 0

secret_points := 15 if {
	input.env.secrets_present
	"network_egress" in actions
} else := 0

score := (sum([w | some a in actions; w := weights[a]]) + trust_points) + secret_points

table_verdict(a) := strict_table[a] if input.strict

table_verdict(a) := input.global[a] if {
	not input.strict
	input.global[a]
}

table_verdict(a) := default_table[a] if {
	not input.strict
	not input.global[a]
}

global := verdicts[max([r | some a in actions; r := rank[table_verdict(a)]])]

unknown_action if {
	some a in actions
	not default_table[a]
}

override := input.overrides[concat("/", [input.package, input.tool])]

decision := "deny" if {
	count(actions) == 0
} else := "deny" if {
	unknown_action
} else := "deny" if {
	score >= 71
} else := override if {
	not input.strict
	override
} else := global
