package configedit

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/trust"
)

// sdkConfig is a config.json in the shape the AgentNode SDK's
// save_config writes its defaults (json.dumps with indent=2 of DEFAULTS,
// timestamps filled in): the current SDK with guard and agent_sandbox.
const sdkConfig = `{
  "version": "1",
  "created_at": "2026-06-01T08:30:00.123456+00:00",
  "updated_at": "2026-06-02T09:00:00.654321+00:00",
  "auto_upgrade_policy": "safe",
  "install_confirmation": "auto",
  "trust": {
    "minimum_trust_level": "verified"
  },
  "permissions": {
    "network": "prompt",
    "filesystem": "prompt",
    "code_execution": "sandboxed"
  },
  "credentials": {
    "require_before_auto_install": true
  },
  "risk_policies": {
    "external_write_capable": "log"
  },
  "guard": {
    "delete": "prompt",
    "write_external": "prompt",
    "execute": "prompt",
    "credential_use": "prompt",
    "network_egress": "allow",
    "write_local": "allow",
    "read": "allow",
    "compute": "allow",
    "unknown": "prompt"
  },
  "agent_sandbox": {
    "enabled": false
  }
}
`

// sdkConfigOld is what SDK releases before Guard wrote: no guard or
// agent_sandbox, and trust.allow_unverified.
const sdkConfigOld = `{
  "version": "1",
  "created_at": "2026-03-01T08:30:00+00:00",
  "updated_at": "2026-03-01T08:30:00+00:00",
  "auto_upgrade_policy": "off",
  "install_confirmation": "prompt",
  "trust": {
    "minimum_trust_level": "trusted",
    "allow_unverified": false
  },
  "permissions": {
    "network": "deny",
    "filesystem": "deny",
    "code_execution": "prompt"
  },
  "credentials": {
    "require_before_auto_install": false
  }
}
`

func writeSDK(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, path, content)
	return path
}

func TestSDKConfigLoads(t *testing.T) {
	c, err := config.Load(writeSDK(t, sdkConfig))
	if err != nil {
		t.Fatalf("SDK-written config: %v", err)
	}
	// Absent agentnode sections take the secure defaults.
	d := config.Defaults()
	if !reflect.DeepEqual(c.Sandbox, d.Sandbox) || c.Lockfile != d.Lockfile || c.Audit != d.Audit ||
		!reflect.DeepEqual(c.LLM, d.LLM) || c.Guard.Strict || !reflect.DeepEqual(c.Guard.Inspectors, d.Guard.Inspectors) {
		t.Errorf("missing sections did not take the defaults: %+v", c)
	}
	if c.AgentSandbox.Enabled || c.Trust.MinimumTrustLevel != trust.LevelVerified || c.Guard.Delete != config.Prompt || c.Guard.Read != config.Allow {
		t.Errorf("shared keys misread: %+v", c)
	}
	if c.Version == nil || *c.Version != "1" || c.Permissions == nil || *c.Permissions.CodeExecution != "sandboxed" ||
		c.Credentials == nil || !*c.Credentials.RequireBeforeAutoInstall || *c.RiskPolicies.ExternalWriteCapable != "log" {
		t.Errorf("SDK keys not kept: %+v", c)
	}

	old, err := config.Load(writeSDK(t, sdkConfigOld))
	if err != nil {
		t.Fatalf("older SDK config: %v", err)
	}
	if old.Trust.MinimumTrustLevel != trust.LevelTrusted || old.Trust.AllowUnverified == nil || *old.Trust.AllowUnverified ||
		old.Guard.Unknown != config.Prompt || old.AgentSandbox.Enabled {
		t.Errorf("older SDK config misread: %+v", old)
	}
}

func TestSDKPermissionMapping(t *testing.T) {
	c, err := config.Load(writeSDK(t, sdkConfig))
	if err != nil {
		t.Fatal(err)
	}
	deny, prompt := c.SDKCeilings()
	if deny != (config.MaxPermissions{}) {
		t.Errorf("SDK defaults deny nothing, got ceiling %+v", deny)
	}
	if want := (config.MaxPermissions{Network: "restricted", Filesystem: "workspace_read", CodeExecution: "limited_subprocess"}); prompt != want {
		t.Errorf("prompt ceiling = %+v, want %+v", prompt, want)
	}
	old, err := config.Load(writeSDK(t, sdkConfigOld))
	if err != nil {
		t.Fatal(err)
	}
	deny, prompt = old.SDKCeilings()
	if want := (config.MaxPermissions{Network: "none", Filesystem: "temp"}); deny != want {
		t.Errorf("deny ceiling = %+v, want %+v", deny, want)
	}
	if want := (config.MaxPermissions{CodeExecution: "none"}); prompt != want {
		t.Errorf("prompt ceiling = %+v, want %+v", prompt, want)
	}
	// guard.max_permissions and permissions.* together: the lower wins.
	old.Guard.MaxPermissions = config.MaxPermissions{Network: "restricted", Filesystem: "any", CodeExecution: "limited_subprocess"}
	got := config.LowerCeiling(old.Guard.MaxPermissions, deny)
	if want := (config.MaxPermissions{Network: "none", Filesystem: "temp", CodeExecution: "limited_subprocess"}); got != want {
		t.Errorf("LowerCeiling = %+v, want %+v", got, want)
	}
	if src := old.CeilingSources(); src["network"] != "guard.max_permissions, permissions.network" || src["code_execution"] != "guard.max_permissions" {
		t.Errorf("CeilingSources = %v", src)
	}
	// An agentnode config without the SDK's keys: no mapping at all.
	if deny, prompt := config.Defaults().SDKCeilings(); deny != (config.MaxPermissions{}) || prompt != (config.MaxPermissions{}) {
		t.Errorf("agentnode defaults map to %+v, %+v", deny, prompt)
	}

	for v, want := range map[string]string{"allow": "", "log": "", "prompt": config.Prompt, "deny": config.Deny} {
		c, err := config.Load(writeSDK(t, strings.Replace(sdkConfig, `"external_write_capable": "log"`, `"external_write_capable": "`+v+`"`, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.WriteExternalFloor(); got != want {
			t.Errorf("external_write_capable %s: floor %q, want %q", v, got, want)
		}
	}
}

func TestSDKConfigBadValuesFailClosed(t *testing.T) {
	cases := []struct{ from, to, key string }{
		{`"network": "prompt"`, `"network": "sometimes"`, "permissions.network"},
		{`"code_execution": "sandboxed"`, `"code_execution": "allow"`, "permissions.code_execution"},
		{`"external_write_capable": "log"`, `"external_write_capable": "block"`, "risk_policies.external_write_capable"},
		{`"delete": "prompt"`, `"delete": "ask"`, "guard.delete"},
		{`"minimum_trust_level": "verified"`, `"minimum_trust_level": "gold"`, "trust.minimum_trust_level"},
		{`"version": "1"`, `"version": "2"`, "version"},
		{`"require_before_auto_install": true`, `"require_before_auto_install": "yes"`, "credentials.require_before_auto_install"},
		{`"auto_upgrade_policy": "safe"`, `"auto_upgrade_policy": "always"`, "auto_upgrade_policy"},
		{`"enabled": false`, `"enabled": "no"`, "agent_sandbox.enabled"},
		// A key nobody defines is still refused.
		{`"install_confirmation": "auto",`, `"install_confirmation": "auto", "telemetry": true,`, "telemetry"},
		{`"unknown": "prompt"`, `"unknown": "prompt", "yolo": "allow"`, "guard.yolo"},
	}
	for _, tc := range cases {
		doc := strings.Replace(sdkConfig, tc.from, tc.to, 1)
		if doc == sdkConfig {
			t.Fatalf("%s: replacement did not apply", tc.key)
		}
		_, err := config.Load(writeSDK(t, doc))
		if !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), tc.key+":") {
			t.Errorf("%s: err = %v; want config_invalid naming the key", tc.key, err)
		}
	}
	// Without "version" a file is not the SDK's: agentnode's sections are
	// required again, so {} or a stray file is never taken for a config.
	doc := strings.Replace(sdkConfig, `"version": "1",`, ``, 1)
	if _, err := config.Load(writeSDK(t, doc)); !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), "llm: required key is missing") {
		t.Errorf("without version: %v", err)
	}
}

func TestSDKConfigSetupKeepsKeys(t *testing.T) {
	path := writeSDK(t, sdkConfig)
	created, added, err := Setup(path)
	if err != nil || created || len(added) == 0 {
		t.Fatalf("Setup = %v, %v, %v", created, added, err)
	}
	if contains(added, "permissions.network") || contains(added, "version") || !contains(added, "sandbox.image") {
		t.Errorf("added = %v", added)
	}
	assertNoTemps(t, path)
	after := readFile(t, path)
	var before, got map[string]any
	if err := json.Unmarshal([]byte(sdkConfig), &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(after, &got); err != nil {
		t.Fatal(err)
	}
	// Every key the SDK wrote is still there with its value.
	var walk func(prefix string, want, have map[string]any)
	walk = func(prefix string, want, have map[string]any) {
		for k, v := range want {
			h, ok := have[k]
			switch w := v.(type) {
			case map[string]any:
				hm, _ := h.(map[string]any)
				walk(prefix+k+".", w, hm)
			default:
				if !ok || !reflect.DeepEqual(h, v) {
					t.Errorf("%s%s: %v after setup, was %v", prefix, k, h, v)
				}
			}
		}
	}
	walk("", before, got)
	// The SDK's top-level keys come first, in the SDK's order.
	for i, k := range []string{`"version"`, `"created_at"`, `"updated_at"`, `"auto_upgrade_policy"`, `"install_confirmation"`, `"trust"`, `"permissions"`, `"credentials"`, `"risk_policies"`, `"sandbox"`} {
		if i > 0 && bytes.Index(after, []byte(k)) < 0 {
			t.Errorf("%s missing", k)
		}
	}
	if bytes.Index(after, []byte(`"version"`)) > bytes.Index(after, []byte(`"permissions"`)) ||
		bytes.Index(after, []byte(`"permissions"`)) > bytes.Index(after, []byte(`"sandbox"`)) {
		t.Errorf("key order:\n%s", after)
	}
	// A second setup has nothing to add and leaves the file as it is.
	if _, added, err := Setup(path); err != nil || added != nil {
		t.Fatalf("second Setup = %v, %v", added, err)
	}
	if !bytes.Equal(readFile(t, path), after) {
		t.Error("second setup rewrote the file")
	}
	// The file still loads, and set keeps the SDK's keys too.
	if err := Set(path, "permissions.network", "deny"); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if *c.Permissions.Network != config.Deny || *c.CreatedAt != "2026-06-01T08:30:00.123456+00:00" || *c.RiskPolicies.ExternalWriteCapable != "log" {
		t.Errorf("after set: %+v", c)
	}
	if err := Set(path, "permissions.network", "maybe"); !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), "permissions.network") {
		t.Errorf("set of a bad value: %v", err)
	}
}

func TestSDKKeysReport(t *testing.T) {
	c, err := config.Load(writeSDK(t, strings.Replace(sdkConfig, `"unknown": "prompt"`,
		`"unknown": "prompt", "agent_overrides": {"research-agent": {"pre_approved_actions": ["read", "network_egress"]}}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := SDKKeys(c)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]SDKKey{}
	for _, k := range keys {
		got[k.Key] = k
	}
	for key, status := range map[string]string{
		"permissions.network":                     config.SDKMapped,
		"permissions.code_execution":              config.SDKMapped,
		"risk_policies.external_write_capable":    config.SDKMapped,
		"auto_upgrade_policy":                     config.SDKNotEnforced,
		"install_confirmation":                    config.SDKNotEnforced,
		"credentials.require_before_auto_install": config.SDKNotEnforced,
		"guard.agent_overrides":                   config.SDKMapped,
		"version":                                 config.SDKNotEnforced,
	} {
		if got[key].Status != status || got[key].Effect == "" {
			t.Errorf("%s: %+v, want status %s", key, got[key], status)
		}
	}
	if e := got["permissions.network"].Effect; !strings.Contains(e, "above restricted are prompted") {
		t.Errorf("permissions.network effect = %q", e)
	}
	for _, shared := range []string{"trust.minimum_trust_level", "guard.delete", "agent_sandbox.enabled"} {
		if _, ok := got[shared]; ok {
			t.Errorf("%s is agentnode's own key, reported as the SDK's", shared)
		}
	}
	// An agentnode config has none.
	if keys, err := SDKKeys(config.Defaults()); err != nil || len(keys) != 0 {
		t.Errorf("Defaults().SDKKeys() = %v, %v", keys, err)
	}
}

// sdkGuard puts extra guard keys (JSON members, no braces) into sdkConfig.
func sdkGuard(t *testing.T, members string) string {
	t.Helper()
	doc := strings.Replace(sdkConfig, `"unknown": "prompt"`, `"unknown": "prompt", `+members, 1)
	if doc == sdkConfig {
		t.Fatal("replacement did not apply")
	}
	return doc
}

func TestSDKToolOverrideForms(t *testing.T) {
	path := writeSDK(t, sdkGuard(t, `"tool_overrides": {
      "acme-pack/purge_cache": {"delete": "allow", "network_egress": "deny"},
      "acme-pack/search": "prompt",
      "acme-pack/noop": {}
    }`))
	c, err := config.Load(path)
	if err != nil {
		t.Fatalf("both forms: %v", err)
	}
	want := map[string]config.ToolOverride{
		"acme-pack/purge_cache": {Actions: map[string]string{"delete": config.Allow, "network_egress": config.Deny}},
		"acme-pack/search":      {Decision: config.Prompt},
		"acme-pack/noop":        {Actions: map[string]string{}},
	}
	if !reflect.DeepEqual(c.Guard.ToolOverrides, want) {
		t.Errorf("tool_overrides = %+v, want %+v", c.Guard.ToolOverrides, want)
	}
	// Setup writes each entry back in the form it was read in.
	if _, _, err := Setup(path); err != nil {
		t.Fatal(err)
	}
	again, err := config.Load(path)
	if err != nil || !reflect.DeepEqual(again.Guard.ToolOverrides, want) {
		t.Errorf("after setup: %+v, %v", again.Guard.ToolOverrides, err)
	}
	// config set takes a decision as typed and the object form as JSON;
	// get returns what is there.
	if err := Set(path, "guard.tool_overrides.acme-pack/v1.fetch", `{"read":"deny"}`); err != nil {
		t.Fatal(err)
	}
	if err := Set(path, "guard.tool_overrides.acme-pack/search", "allow"); err != nil {
		t.Fatal(err)
	}
	if v, err := Get(path, "guard.tool_overrides.acme-pack/v1.fetch"); err != nil || !reflect.DeepEqual(v, map[string]any{"read": "deny"}) {
		t.Errorf("get object form = %#v, %v", v, err)
	}
	if v, err := Get(path, "guard.tool_overrides.acme-pack/search"); err != nil || v != "allow" {
		t.Errorf("get decision = %#v, %v", v, err)
	}
}

// What the SDK silently drops from guard.tool_overrides (a key without
// "/", an action type or a decision it does not know, a value that is
// neither) is refused: dropped, a deny or prompt written with a typo would
// silently not narrow anything.
func TestSDKToolOverrideRefusals(t *testing.T) {
	for _, tc := range []struct{ members, want string }{
		{`"tool_overrides": {"acme-pack": {"delete": "deny"}}`, "guard.tool_overrides.acme-pack: invalid name"},
		{`"tool_overrides": {"acme-pack/x": {"delet": "deny"}}`, "guard.tool_overrides.acme-pack/x.delet: not an action type; allowed: read, compute,"},
		{`"tool_overrides": {"acme-pack/x": {"delete": "block"}}`, `guard.tool_overrides.acme-pack/x.delete: "block" is not allowed; allowed values: allow, prompt, deny`},
		{`"tool_overrides": {"acme-pack/x": {"delete": true}}`, `guard.tool_overrides.acme-pack/x.delete: true is not allowed`},
		{`"tool_overrides": {"acme-pack/x": "block"}`, `guard.tool_overrides.acme-pack/x: "block" is not allowed; allowed values: allow, prompt, deny`},
		{`"tool_overrides": {"acme-pack/x": ["deny"]}`, "guard.tool_overrides.acme-pack/x: must be string or object, not array"},
		{`"tool_overrides": {"acme-pack/x": 2}`, "guard.tool_overrides.acme-pack/x: must be string or object, not number"},
	} {
		_, err := config.Load(writeSDK(t, sdkGuard(t, tc.members)))
		if !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v; want config_invalid with %q", tc.members, err, tc.want)
		}
	}
}

func TestSDKRateLimitForms(t *testing.T) {
	path := writeSDK(t, sdkGuard(t, `"rate_limits": {
      "default": {"calls_per_minute": 30},
      "slow-pack": {"calls_per_minute": 5, "calls_per_hour": 50, "burst_size": 2},
      "own-pack": {"per_minute": 7, "per_hour": 70, "burst": 3},
      "empty-pack": {}
    }`))
	c, err := config.Load(path)
	if err != nil {
		t.Fatalf("both forms: %v", err)
	}
	for pkg, want := range map[string][3]int64{
		"default":    {0, 30, 0},
		"slow-pack":  {2, 5, 50},
		"own-pack":   {3, 7, 70},
		"empty-pack": {0, 0, 0},
	} {
		b, m, h := c.Guard.RateLimits[pkg].Effective()
		if got := [3]int64{b, m, h}; got != want {
			t.Errorf("%s: Effective = %v, want %v", pkg, got, want)
		}
	}
	// Setup keeps each entry's form and keys.
	if _, _, err := Setup(path); err != nil {
		t.Fatal(err)
	}
	data := string(readFile(t, path))
	for _, s := range []string{`"calls_per_minute": 30`, `"burst_size": 2`, `"per_minute": 7`, `"empty-pack": {}`} {
		if !strings.Contains(data, s) {
			t.Errorf("after setup the file lacks %s", s)
		}
	}
	if strings.Contains(data, `"per_hour": 0`) || strings.Contains(data, `"burst": 0`) {
		t.Errorf("setup wrote absent values as 0:\n%s", data)
	}
}

// What the SDK silently ignores in guard.rate_limits (a key of neither
// form, a value that is not an integer, 0 or less) is refused: ignored, a
// tighter limit written wrongly would silently not apply.
func TestSDKRateLimitRefusals(t *testing.T) {
	for _, tc := range []struct{ members, want string }{
		{`"rate_limits": {"default": {"calls_per_min": 5}}`, "guard.rate_limits.default.calls_per_min: unknown key"},
		{`"rate_limits": {"default": {"calls_per_minute": "5"}}`, "guard.rate_limits.default.calls_per_minute: must be integer, not string"},
		{`"rate_limits": {"default": {"calls_per_minute": 5.5}}`, "guard.rate_limits.default.calls_per_minute: must be integer"},
		{`"rate_limits": {"default": {"burst_size": 0}}`, "guard.rate_limits.default.burst_size: 0 is below the minimum 1"},
		{`"rate_limits": {"default": {"calls_per_hour": -1}}`, "guard.rate_limits.default.calls_per_hour: -1 is below the minimum 1"},
		{`"rate_limits": {"a-pack": {"per_minute": 5, "calls_per_hour": 50}}`, "guard.rate_limits.a-pack.per_hour: required key is missing"},
		{`"rate_limits": {"a-pack": {"per_minute": 5, "per_hour": 50, "burst": 1, "burst_size": 2}}`, "guard.rate_limits.a-pack: mixes"},
	} {
		_, err := config.Load(writeSDK(t, sdkGuard(t, tc.members)))
		if !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v; want config_invalid with %q", tc.members, err, tc.want)
		}
	}
}

func TestSDKAgentOverrides(t *testing.T) {
	c, err := config.Load(writeSDK(t, sdkGuard(t, `"agent_overrides": {"research-agent": {"pre_approved_actions": ["read", "delete"]}, "idle-agent": {}}`)))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Guard.AgentOverrides["research-agent"].PreApprovedActions; !reflect.DeepEqual(got, []string{"read", "delete"}) {
		t.Errorf("pre_approved_actions = %v", got)
	}
	// An action type nobody defines is refused, as is a key of neither.
	for _, members := range []string{
		`"agent_overrides": {"research-agent": {"pre_approved_actions": ["reads"]}}`,
		`"agent_overrides": {"research-agent": {"pre_approved": ["read"]}}`,
	} {
		if _, err := config.Load(writeSDK(t, sdkGuard(t, members))); !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), "guard.agent_overrides.research-agent") {
			t.Errorf("%s: err = %v", members, err)
		}
	}
}
