package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The AgentNode SDK writes its own config.json (~/.agentnode/config.json,
// the same file): version, created_at, updated_at, auto_upgrade_policy,
// install_confirmation, trust.minimum_trust_level, permissions.*,
// credentials.*, risk_policies.*, the guard.<action> classes,
// guard.agent_overrides and agent_sandbox.enabled. agentnode reads such a
// file as its own (specs/config.md, "AgentNode SDK keys"): the keys it
// shares are agentnode's keys, the SDK's own keys are either mapped onto
// agentnode's policy (permissions.*, risk_policies.external_write_capable)
// or accepted, kept and reported by `agentnode doctor` as not enforced. A
// file with "version" is the SDK's; its absent agentnode sections take
// their defaults, which are the secure ones.

// SDKPermissions is the AgentNode SDK's permissions section: a decision
// for packages by the levels they declare.
type SDKPermissions struct {
	Network       *string `json:"network,omitempty"`        // allow | prompt | deny
	Filesystem    *string `json:"filesystem,omitempty"`     // allow | prompt | deny
	CodeExecution *string `json:"code_execution,omitempty"` // sandboxed | prompt | deny
}

// SDKCredentials is the AgentNode SDK's credentials section.
type SDKCredentials struct {
	RequireBeforeAutoInstall *bool   `json:"require_before_auto_install,omitempty"`
	ResolveMode              *string `json:"resolve_mode,omitempty"`
}

// RiskPolicies is the AgentNode SDK's risk_policies section.
type RiskPolicies struct {
	ExternalWriteCapable *string `json:"external_write_capable,omitempty"` // allow | log | prompt | deny
}

// RunLog is the AgentNode SDK's run_log section (its run log retention).
type RunLog struct {
	MaxAgeDays *int64 `json:"max_age_days,omitempty"`
	MaxCount   *int64 `json:"max_count,omitempty"`
}

// AgentOverride is one entry of the AgentNode SDK's guard.agent_overrides:
// the action types pre-approved for the tool calls that agent makes.
type AgentOverride struct {
	PreApprovedActions []string `json:"pre_approved_actions,omitempty"`
}

// ToolOverride is one entry of guard.tool_overrides ("PKG/TOOL"), in one of
// two forms. agentnode's: a decision (Decision) for the whole call, whatever
// its action types. The AgentNode SDK's: an object of action type to
// decision (Actions, non-nil even when empty); each action type of the call
// uses its entry when there is one, else the policy. It is written back in
// the form it was read in.
type ToolOverride struct {
	Decision string
	Actions  map[string]string
}

// MarshalJSON writes Actions as an object when it is set, else Decision.
func (o ToolOverride) MarshalJSON() ([]byte, error) {
	if o.Actions != nil {
		return json.Marshal(o.Actions)
	}
	return json.Marshal(o.Decision)
}

// UnmarshalJSON reads a decision string or an object of action type to
// decision; the schema has checked the names and values.
func (o *ToolOverride) UnmarshalJSON(b []byte) error {
	*o = ToolOverride{}
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		m := map[string]string{}
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("tool override: %w", err)
		}
		o.Actions = m
		return nil
	}
	if err := json.Unmarshal(b, &o.Decision); err != nil {
		return fmt.Errorf("tool override: want a decision or an object of action type to decision: %w", err)
	}
	return nil
}

// Level is p's ceiling of kind ("network", "filesystem",
// "code_execution"); "" when unset or an unknown kind.
func (p MaxPermissions) Level(kind string) string {
	switch kind {
	case "network":
		return p.Network
	case "filesystem":
		return p.Filesystem
	case "code_execution":
		return p.CodeExecution
	}
	return ""
}

// SDKCeilings maps the AgentNode SDK's permissions.* onto permission
// ceilings on the manifest's ladders (NetworkLevels, FilesystemLevels,
// CodeExecutionLevels): deny is the highest level a package may declare
// (above it: denied), prompt the highest level that runs without asking
// (above it: prompt). An empty level is no limit. As the SDK decides:
//
//	permissions.network        allow: -   prompt: above restricted       deny: above none
//	permissions.filesystem     allow: -   prompt: above workspace_read   deny: above temp
//	permissions.code_execution sandboxed: above limited_subprocess; prompt: above none; deny: above none (deny)
func (c *Config) SDKCeilings() (deny, prompt MaxPermissions) {
	p := c.Permissions
	if p == nil {
		return
	}
	val := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	switch val(p.Network) {
	case Prompt:
		prompt.Network = "restricted"
	case Deny:
		deny.Network = "none"
	}
	switch val(p.Filesystem) {
	case Prompt:
		prompt.Filesystem = "workspace_read"
	case Deny:
		deny.Filesystem = "temp"
	}
	switch val(p.CodeExecution) {
	case "sandboxed":
		prompt.CodeExecution = "limited_subprocess"
	case Prompt:
		prompt.CodeExecution = "none"
	case Deny:
		deny.CodeExecution = "none"
	}
	return deny, prompt
}

// LowerCeiling returns, per kind, the lower of two ceilings on that kind's
// ladder; an empty level is no limit, so the other one wins. A level that
// is not on the ladder wins too (the policy then denies: fail closed).
func LowerCeiling(a, b MaxPermissions) MaxPermissions {
	low := func(ladder []string, x, y string) string {
		switch {
		case x == "":
			return y
		case y == "":
			return x
		}
		ix, iy := indexOf(ladder, x), indexOf(ladder, y)
		switch {
		case ix < 0:
			return x
		case iy < 0 || iy < ix:
			return y
		}
		return x
	}
	return MaxPermissions{
		Network:       low(NetworkLevels, a.Network, b.Network),
		Filesystem:    low(FilesystemLevels, a.Filesystem, b.Filesystem),
		CodeExecution: low(CodeExecutionLevels, a.CodeExecution, b.CodeExecution),
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// WriteExternalFloor is the decision the AgentNode SDK's
// risk_policies.external_write_capable asks for write_external at least:
// prompt or deny, else "" (allow and log change nothing).
func (c *Config) WriteExternalFloor() string {
	if c.RiskPolicies == nil || c.RiskPolicies.ExternalWriteCapable == nil {
		return ""
	}
	switch v := *c.RiskPolicies.ExternalWriteCapable; v {
	case Prompt, Deny:
		return v
	}
	return ""
}

// CeilingSources names, per kind, the config keys that set the effective
// deny ceiling of c (guard.max_permissions, permissions.KIND or both),
// for messages.
func (c *Config) CeilingSources() map[string]string {
	deny, _ := c.SDKCeilings()
	out := map[string]string{}
	for _, kind := range []string{"network", "filesystem", "code_execution"} {
		var keys []string
		if c.Guard.MaxPermissions.Level(kind) != "" {
			keys = append(keys, "guard.max_permissions")
		}
		if deny.Level(kind) != "" {
			keys = append(keys, "permissions."+kind)
		}
		out[kind] = strings.Join(keys, ", ")
	}
	return out
}
