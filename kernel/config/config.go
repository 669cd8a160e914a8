// Package config reads and validates agentnode's config.json
// (AGENTNODE_HOME/config.json, or AGENTNODE_CONFIG).
//
// The file is checked against specs/schema/config.schema.json and a few
// rules a schema cannot express (unique trust key ids, keys that decode to
// 32 bytes). Everything fails closed: a missing file is reason.ErrNotSetUp, a
// file that cannot be read, is not JSON, has duplicate keys, unknown keys or
// bad values, or is writable by group or others is reason.ErrConfigInvalid,
// with a message naming the file and the offending key. Nothing is silently
// defaulted except leaf keys absent from an otherwise valid file, which take
// the documented defaults (specs/config.md); the optional keys that have no
// default (guard.max_permissions.*, sandbox.python_image) are then unset, and setup never writes
// them.
//
// It belongs in the trusted core because every decision reads the config
// (Load) and must refuse one it cannot trust. Writing the file (`agentnode
// setup`, `config set`, `trust add-key`, image pins) is a front end's:
// cmd/agentnode/configedit, which goes through this package's checks
// (ReadDocument, ValidateDocument, Problems, Keys) before it writes.
//
// It is in the trusted core because every decision starts from the config it
// reads; writing the file is a front end's task (cmd/agentnode/configedit).
package config

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentnode/agentnode/sdk/trust"
)

// Values of sandbox.host_trust_policy.
const (
	HostCuratedOnly = "curated_only"
	HostDefault     = "default"
	HostNone        = "none"
)

// Values of sandbox.host_confinement: how a tool that runs on the host is
// confined when the kernel lacks the Landlock ABI that executor/confine needs.
const (
	// HostConfinementRequired refuses the run (sandbox_unavailable).
	HostConfinementRequired = "required"
	// HostConfinementBestEffort runs it with what the kernel has; the
	// audit record says so.
	HostConfinementBestEffort = "best_effort"
)

// Guard decisions.
const (
	Allow  = "allow"
	Prompt = "prompt"
	Deny   = "deny"
)

// Actions lists the Guard action types, each a key guard.<action>.
var Actions = []string{
	"read", "compute", "write_local", "write_external", "delete",
	"execute", "credential_use", "network_egress", "unknown",
}

// PlaceholderImage is the default sandbox.image: a digest of zeros that the
// sandbox refuses with image_unpinned until `agentnode sandbox build|pull`
// pins a real one.
const PlaceholderImage = "agentnode/sandbox@sha256:0000000000000000000000000000000000000000000000000000000000000000"

// Config is config.json. The json tags mirror the schema exactly. The
// pointer fields are the AgentNode SDK's keys (sdk.go): nil when the file
// does not have them, kept as written when it does, so a config the SDK
// wrote keeps its keys, in the SDK's order, through setup and set.
type Config struct {
	Version             *string `json:"version,omitempty"`
	CreatedAt           *string `json:"created_at,omitempty"`
	UpdatedAt           *string `json:"updated_at,omitempty"`
	AutoUpgradePolicy   *string `json:"auto_upgrade_policy,omitempty"`
	InstallConfirmation *string `json:"install_confirmation,omitempty"`

	Trust Trust `json:"trust"`

	Permissions  *SDKPermissions `json:"permissions,omitempty"`
	Credentials  *SDKCredentials `json:"credentials,omitempty"`
	RiskPolicies *RiskPolicies   `json:"risk_policies,omitempty"`
	RunLog       *RunLog         `json:"run_log,omitempty"`

	Sandbox      Sandbox      `json:"sandbox"`
	Guard        Guard        `json:"guard"`
	Lockfile     Lockfile     `json:"lockfile"`
	Audit        Audit        `json:"audit"`
	AgentSandbox AgentSandbox `json:"agent_sandbox"`
	LLM          LLM          `json:"llm"`
}

// Trust is the trust section.
type Trust struct {
	MinimumTrustLevel string     `json:"minimum_trust_level"`
	Keys              []TrustKey `json:"keys"`
	Plugin            string     `json:"plugin"`
	// AllowUnverified is the AgentNode SDK's trust.allow_unverified
	// (accepted, not enforced).
	AllowUnverified *bool `json:"allow_unverified,omitempty"`
}

// TrustKey is a pinned Ed25519 issuer key.
type TrustKey struct {
	ID string `json:"id"`
	// PublicKey is the raw 32-byte key in standard base64 with padding.
	PublicKey string `json:"public_key"`
}

// Ed25519 decodes the public key.
func (k TrustKey) Ed25519() (ed25519.PublicKey, error) {
	return decodePublicKey(k.PublicKey)
}

// Sandbox is the sandbox section.
type Sandbox struct {
	HostTrustPolicy string `json:"host_trust_policy"`
	HostConfinement string `json:"host_confinement"`
	Backend         string `json:"backend"`
	Image           string `json:"image"`
	// PythonImage is sandbox.python_image, the Python runtime image of
	// `runtime: python` tools in the sandbox (pinned by
	// `agentnode sandbox build --python`); optional, no default: empty
	// means Python tools cannot run sandboxed.
	PythonImage string `json:"python_image,omitempty"`
	// NodeImage is sandbox.node_image, the Node runtime image of
	// `[node, /pack/FILE]` MCP servers in the sandbox (pinned by
	// `agentnode sandbox build --node`); optional: empty refuses them.
	NodeImage string `json:"node_image,omitempty"`
	// PythonInstallerImage and NodeInstallerImage pin the images `agentnode install`
	// resolves Python (cmd/agentnode/pydeps) and npm (npmdeps) dependencies in; "" when none.
	PythonInstallerImage string   `json:"python_installer_image,omitempty"`
	NodeInstallerImage   string   `json:"node_installer_image,omitempty"`
	Limits               Limits   `json:"limits"`
	WarmPool             WarmPool `json:"warm_pool"`
	// Runtime and RuntimeByTrust (per trust tier) choose native or gvisor
	// for sandboxed runs (sdk/sandbox.RuntimeFor); empty: native.
	Runtime        string            `json:"runtime,omitempty"`
	RuntimeByTrust map[string]string `json:"runtime_by_trust,omitempty"`
}

// WarmPool is sandbox.warm_pool: prepared sandboxes `mcp serve` lets the
// backend keep (Size 0: none); a one-shot run never prepares any.
type WarmPool struct {
	Size        int   `json:"size"`
	IdleSeconds int64 `json:"idle_seconds"`
}

// Limits are the per-run resource limits of the sandbox.
type Limits struct {
	Memory         string  `json:"memory"`
	Pids           int64   `json:"pids"`
	CPUs           float64 `json:"cpus"`
	TimeoutSeconds int64   `json:"timeout_seconds"`
	TmpSize        string  `json:"tmp_size"`
}

// MemoryBytes is Memory in bytes.
func (l Limits) MemoryBytes() (int64, error) { return ParseSize(l.Memory) }

// TmpSizeBytes is TmpSize in bytes.
func (l Limits) TmpSizeBytes() (int64, error) { return ParseSize(l.TmpSize) }

// Guard is the guard section: one decision per action type plus strict mode,
// per-tool overrides, per-package rate limits and the inspector chain.
type Guard struct {
	Read          string `json:"read"`
	Compute       string `json:"compute"`
	WriteLocal    string `json:"write_local"`
	WriteExternal string `json:"write_external"`
	Delete        string `json:"delete"`
	Execute       string `json:"execute"`
	CredentialUse string `json:"credential_use"`
	NetworkEgress string `json:"network_egress"`
	Unknown       string `json:"unknown"`

	Strict        bool                    `json:"strict"`
	ToolOverrides map[string]ToolOverride `json:"tool_overrides"`
	RateLimits    map[string]RateLimit    `json:"rate_limits"`
	// AgentOverrides is the AgentNode SDK's guard.agent_overrides: the
	// action types pre-approved for the tool calls an agent makes.
	AgentOverrides map[string]AgentOverride `json:"agent_overrides,omitempty"`
	Inspectors     []string                 `json:"inspectors"`
	// MaxPermissions is the permission ceiling (guard.max_permissions): a
	// package that declares more than it allows is denied. Absent by
	// default, and never written by setup.
	MaxPermissions MaxPermissions `json:"max_permissions,omitzero"`
}

// MaxPermissions is the highest permission level a package may declare,
// per kind; an empty field is no limit for that kind. The levels are the
// manifest's (permissions.network.level and so on), lowest first in
// NetworkLevels, FilesystemLevels and CodeExecutionLevels.
type MaxPermissions struct {
	Network       string `json:"network,omitempty"`
	Filesystem    string `json:"filesystem,omitempty"`
	CodeExecution string `json:"code_execution,omitempty"`
}

// Permission levels of each kind, lowest first.
var (
	NetworkLevels       = []string{"none", "restricted", "unrestricted"}
	FilesystemLevels    = []string{"none", "temp", "workspace_read", "workspace_write", "any"}
	CodeExecutionLevels = []string{"none", "limited_subprocess", "shell"}
)

// Decision returns the configured decision for an action type (one of
// Actions); ok is false for anything else.
func (g *Guard) Decision(action string) (decision string, ok bool) {
	switch action {
	case "read":
		return g.Read, true
	case "compute":
		return g.Compute, true
	case "write_local":
		return g.WriteLocal, true
	case "write_external":
		return g.WriteExternal, true
	case "delete":
		return g.Delete, true
	case "execute":
		return g.Execute, true
	case "credential_use":
		return g.CredentialUse, true
	case "network_egress":
		return g.NetworkEgress, true
	case "unknown":
		return g.Unknown, true
	}
	return "", false
}

// Policy returns action type → decision for every action in Actions.
func (g *Guard) Policy() map[string]string {
	m := make(map[string]string, len(Actions))
	for _, a := range Actions {
		m[a], _ = g.Decision(a)
	}
	return m
}

// RateLimit is a per-package rate limit (guard.rate_limits.PKG), in
// agentnode's form (PerMinute, PerHour and Burst, all set) or the AgentNode
// SDK's (CallsPerMinute, CallsPerHour, BurstSize, each optional). Zero is
// absent: every value the schema allows is at least 1.
type RateLimit struct {
	PerMinute int64 `json:"per_minute,omitempty"`
	PerHour   int64 `json:"per_hour,omitempty"`
	Burst     int64 `json:"burst,omitempty"`

	CallsPerMinute int64 `json:"calls_per_minute,omitempty"`
	CallsPerHour   int64 `json:"calls_per_hour,omitempty"`
	BurstSize      int64 `json:"burst_size,omitempty"`
}

// DefaultRateLimit is the guard.rate_limits entry that applies to every
// package without an entry of its own (the AgentNode SDK's "default").
const DefaultRateLimit = "default"

// Effective returns the limit's three windows, whichever form it is in:
// burst, per minute and per hour; 0 where the entry leaves the value to
// the built-in limit of the package's type.
func (r RateLimit) Effective() (burst, perMinute, perHour int64) {
	pick := func(own, sdk int64) int64 {
		if own != 0 {
			return own
		}
		return sdk
	}
	return pick(r.Burst, r.BurstSize), pick(r.PerMinute, r.CallsPerMinute), pick(r.PerHour, r.CallsPerHour)
}

// Lockfile is the lockfile section.
type Lockfile struct {
	Strict bool `json:"strict"`
}

// Audit is the audit section (rotation).
type Audit struct {
	MaxSizeMB int64 `json:"max_size_mb"`
	MaxFiles  int64 `json:"max_files"`
}

// AgentSandbox is the agent_sandbox section.
type AgentSandbox struct {
	Enabled bool     `json:"enabled"`
	LLM     AgentLLM `json:"llm"`
}

// AgentLLM are the host ceilings for brokered LLM calls.
type AgentLLM struct {
	Enabled        bool     `json:"enabled"`
	MaxCalls       int64    `json:"max_calls"`
	MaxInputChars  int64    `json:"max_input_chars"`
	MaxOutputChars int64    `json:"max_output_chars"`
	AllowedModels  []string `json:"allowed_models"`
}

// LLM is the llm section.
type LLM struct {
	Providers map[string]Provider `json:"providers"`
}

// Provider is an LLM provider the broker may call.
type Provider struct {
	API     string `json:"api"`
	BaseURL string `json:"base_url,omitempty"`
}

// Defaults returns the secure defaults that `agentnode setup` writes. Each
// call returns a fresh value.
func Defaults() *Config {
	return &Config{
		Trust: Trust{
			MinimumTrustLevel: trust.LevelVerified,
			Keys:              []TrustKey{},
			Plugin:            "attest",
		},
		Sandbox: Sandbox{
			HostTrustPolicy: HostCuratedOnly,
			HostConfinement: HostConfinementRequired,
			Backend:         "libcontainer",
			Image:           PlaceholderImage,
			Runtime:         "native",
			Limits: Limits{
				Memory:         "512m",
				Pids:           256,
				CPUs:           1,
				TimeoutSeconds: 120,
				TmpSize:        "64m",
			},
			WarmPool: WarmPool{Size: 1, IdleSeconds: 60},
		},
		Guard: Guard{
			Read:          Allow,
			Compute:       Allow,
			WriteLocal:    Allow,
			WriteExternal: Prompt,
			Delete:        Prompt,
			Execute:       Prompt,
			CredentialUse: Prompt,
			NetworkEgress: Allow,
			Unknown:       Prompt,
			ToolOverrides: map[string]ToolOverride{},
			RateLimits:    map[string]RateLimit{},
			Inspectors:    []string{"builtin"},
		},
		Audit: Audit{MaxSizeMB: 10, MaxFiles: 5},
		AgentSandbox: AgentSandbox{
			LLM: AgentLLM{
				MaxCalls:       20,
				MaxInputChars:  24000,
				MaxOutputChars: 24000,
				AllowedModels:  []string{},
			},
		},
		LLM: LLM{Providers: map[string]Provider{}},
	}
}

// Normalize replaces nil maps and slices with empty ones, so the config
// marshals to what the schema expects ([] and {}, never null).
func (c *Config) Normalize() {
	if c.Trust.Keys == nil {
		c.Trust.Keys = []TrustKey{}
	}
	if c.Guard.ToolOverrides == nil {
		c.Guard.ToolOverrides = map[string]ToolOverride{}
	}
	if c.Guard.RateLimits == nil {
		c.Guard.RateLimits = map[string]RateLimit{}
	}
	if c.Guard.Inspectors == nil {
		c.Guard.Inspectors = []string{}
	}
	if c.AgentSandbox.LLM.AllowedModels == nil {
		c.AgentSandbox.LLM.AllowedModels = []string{}
	}
	if c.LLM.Providers == nil {
		c.LLM.Providers = map[string]Provider{}
	}
}

// ParseSize parses a size of the form the schema allows (digits and a unit
// k, m or g, powers of 1024) into bytes.
func ParseSize(s string) (int64, error) {
	if len(s) < 2 {
		return 0, fmt.Errorf("size %q: want digits and a unit k, m or g (e.g. 512m)", s)
	}
	var mult int64
	switch s[len(s)-1] {
	case 'k':
		mult = 1 << 10
	case 'm':
		mult = 1 << 20
	case 'g':
		mult = 1 << 30
	default:
		return 0, fmt.Errorf("size %q: unit must be k, m or g", s)
	}
	digits := s[:len(s)-1]
	if strings.HasPrefix(digits, "0") || strings.ContainsAny(digits, "+-") {
		return 0, fmt.Errorf("size %q: want a positive number without leading zeros", s)
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want a positive number", s)
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return n * mult, nil
}

// decodePublicKey decodes a trust key: strict standard base64 of exactly
// ed25519.PublicKeySize bytes.
func decodePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("public key is not standard base64: %w", err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key is %d bytes, want a raw %d-byte Ed25519 key", len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}
