package configedit

import (
	"strings"

	"github.com/agentnode/agentnode/kernel/config"
)

// SDKKey is an AgentNode SDK key present in a config.
type SDKKey struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Status string `json:"status"` // config.SDKMapped or config.SDKNotEnforced
	// Effect says what agentnode does with it.
	Effect string `json:"effect"`
}

// SDKKeys lists the AgentNode SDK's own keys that c has, sorted by key.
// The keys both share (trust.minimum_trust_level, guard.<action>,
// agent_sandbox.enabled, audit.*) are agentnode's and not listed.
func SDKKeys(c *config.Config) ([]SDKKey, error) {
	leaves, _, err := config.Keys()
	if err != nil {
		return nil, err
	}
	doc, err := c.Document()
	if err != nil {
		return nil, err
	}
	var out []SDKKey
	for _, k := range leaves {
		if k.SDK == "" {
			continue
		}
		v, ok := config.LookupPath(doc, strings.Split(k.Name, "."))
		if !ok {
			continue
		}
		out = append(out, SDKKey{Key: k.Name, Value: plain(v), Status: k.SDK, Effect: sdkEffect(c, k.Name)})
	}
	return out, nil
}

// sdkEffect says what agentnode does with the AgentNode SDK key of c.
func sdkEffect(c *config.Config, key string) string {
	deny, prompt := c.SDKCeilings()
	kind, _ := strings.CutPrefix(key, "permissions.")
	switch key {
	case "permissions.network", "permissions.filesystem", "permissions.code_execution":
		switch {
		case deny.Level(kind) != "":
			return "packages declaring " + kind + " above " + deny.Level(kind) + " are denied (policy_denied)"
		case prompt.Level(kind) != "":
			return "packages declaring " + kind + " above " + prompt.Level(kind) + " are prompted for (denied when not interactive)"
		}
		return "no limit on " + kind
	case "risk_policies.external_write_capable":
		if v := c.RiskPolicies.ExternalWriteCapable; v != nil && (*v == config.Prompt || *v == config.Deny) {
			return "guard.write_external is at least " + *v
		}
		return "no effect (log and allow change nothing)"
	case "guard.agent_overrides":
		return "for the tool calls these agents make, a prompt for a listed action type becomes allow (never a deny, critical risk or a permission ceiling; ignored in strict mode)"
	}
	return "accepted, not enforced by agentnode"
}
