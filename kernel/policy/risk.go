package policy

import (
	"strings"
)

// table is a global policy indexed by action bit.
type table [numActions]Verdict

var defaultTable = table{
	bitRead: Allow, bitCompute: Allow, bitWriteLocal: Allow, bitNetworkEgress: Allow,
	bitWriteExternal: Prompt, bitDelete: Prompt, bitExecute: Prompt, bitCredentialUse: Prompt, bitUnknown: Prompt,
}

var strictTable = table{
	bitRead: Allow, bitCompute: Allow, bitNetworkEgress: Allow,
	bitCredentialUse: Prompt, bitWriteLocal: Prompt,
	bitWriteExternal: Deny, bitDelete: Deny, bitExecute: Deny, bitUnknown: Deny,
}

func (t *table) asMap() map[Action]Verdict {
	m := make(map[Action]Verdict, numActions)
	for i, a := range Actions {
		m[a] = t[i]
	}
	return m
}

// DefaultPolicy is AgentNode's default global policy. It is a copy: the
// engine does not read it.
var DefaultPolicy = defaultTable.asMap()

// StrictPolicy is AgentNode's strict global policy. It is a copy: the
// engine does not read it.
var StrictPolicy = strictTable.asMap()

// Band is a risk band.
type Band string

// Risk bands.
const (
	Low      Band = "low"
	Medium   Band = "medium"
	High     Band = "high"
	Critical Band = "critical"
)

// Band thresholds: a score at or above one is in that band.
const (
	CriticalScore = 71
	HighScore     = 46
	MediumScore   = 21
)

// BandOf returns the band of a risk score.
func BandOf(score int) Band {
	switch {
	case score >= CriticalScore:
		return Critical
	case score >= HighScore:
		return High
	case score >= MediumScore:
		return Medium
	}
	return Low
}

// riskScore scores a call: +20 delete, +15 write_external, +15 execute,
// +10 credential_use, +20 unverified (or unknown, or no) trust with any
// high-risk action, +15 secrets present with network egress.
func riskScore(s ActionSet, trustLevel string, env Env) int {
	score := 0
	if s.Has(Delete) {
		score += 20
	}
	if s.Has(WriteExternal) {
		score += 15
	}
	if s.Has(Execute) {
		score += 15
	}
	if s.Has(CredentialUse) {
		score += 10
	}
	if s&highRisk != 0 && lowTrust(trustLevel) {
		score += 20
	}
	if env.SecretsPresent && s.Has(NetworkEgress) {
		score += 15
	}
	return score
}

// lowTrust reports whether a trust level counts as unverified for the risk
// score: unverified, unknown, none, and anything that is not a higher tier.
func lowTrust(level string) bool {
	switch level {
	case "verified", "trusted", "curated":
		return false
	}
	return true
}

// Env is the environment context of a decision.
type Env struct {
	CI             bool
	Interactive    bool
	SecretsPresent bool
	Root           bool
}

// Secret-looking environment variable name prefixes and CI markers.
var (
	secretPrefixes = []string{"AWS_", "OPENAI_", "STRIPE_", "GCP_", "AZURE_", "ANTHROPIC_", "DATABASE_URL", "SECRET"}
	ciVars         = []string{"CI", "GITHUB_ACTIONS", "GITLAB_CI", "CIRCLECI", "JENKINS_URL", "TRAVIS"}
)

// EnvFrom derives the secrets-present and CI flags from an environment
// (os.Environ form): secrets are present when a variable whose name starts
// with one of the secret prefixes has a value; CI when a CI marker is set to
// anything but empty, 0, false, no or off. Interactive and Root are set by
// the caller.
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
