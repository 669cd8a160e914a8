package configedit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/trust"
)

// setUp runs Setup in a fresh directory and returns the config path.
func setUp(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "home", "config.json")
	created, added, err := Setup(path)
	if err != nil || !created || added != nil {
		t.Fatalf("Setup = %v, %v, %v", created, added, err)
	}
	return path
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// assertNoTemps fails if a temporary file was left next to path.
func assertNoTemps(t *testing.T, path string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

func newKey(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pub)
}

func TestMissingConfigIsNotSetUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	_, errLoad := config.Load(path)
	_, errList := List(path)
	_, errGet := Get(path, "trust.minimum_trust_level")
	errSet := Set(path, "guard.strict", "true")
	errKey := AddTrustKey(path, "k1", newKey(t))
	for name, err := range map[string]error{"Load": errLoad, "List": errList, "Get": errGet, "Set": errSet, "AddTrustKey": errKey} {
		if !errors.Is(err, reason.ErrNotSetUp) || reason.CodeOf(err) != reason.NotSetUp {
			t.Errorf("%s: err = %v, want not_set_up", name, err)
			continue
		}
		if !strings.Contains(err.Error(), "agentnode setup") || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: message or cause missing: %v", name, err)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed call created the config: %v", err)
	}
}

// optionalKeys are the leaf keys without a default: absent means unset
// (no limit), and setup never writes them.
var optionalKeys = []string{"guard.max_permissions.code_execution", "guard.max_permissions.filesystem", "guard.max_permissions.network",
	"sandbox.python_image", "sandbox.python_installer_image", "sandbox.node_image", "sandbox.node_installer_image",
	"sandbox.runtime_by_trust.unknown", "sandbox.runtime_by_trust.unverified", "sandbox.runtime_by_trust.verified",
	"sandbox.runtime_by_trust.trusted", "sandbox.runtime_by_trust.curated"}

func TestDefaultsAreValidAndMatchSchemaDefaults(t *testing.T) {
	d := config.Defaults()
	if err := Validate(d); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	schema, err := config.SchemaDocument()
	if err != nil {
		t.Fatal(err)
	}
	leaves, _, err := config.Keys()
	if err != nil {
		t.Fatal(err)
	}
	if len(leaves) < 34 {
		t.Fatalf("only %d leaf keys: %v", len(leaves), leaves)
	}
	for _, k := range leaves {
		key := k.Name
		// The "default" annotation sits next to a $ref, on the unresolved node.
		var node any = schema
		for _, p := range strings.Split(key, ".") {
			node = node.(map[string]any)["properties"].(map[string]any)[p]
		}
		want, ok := node.(map[string]any)["default"]
		if ok != k.Default {
			t.Errorf("%s: Key.Default = %v, schema says %v", key, !ok, ok)
		}
		if contains(optionalKeys, key) || k.SDK != "" {
			// No default: unset, and Get says so with nil.
			if ok {
				t.Errorf("%s: optional key has a schema default", key)
			}
			if got, err := getKey(d, key); err != nil || got != nil {
				t.Errorf("Get(%s) = %#v, %v; want nil (unset)", key, got, err)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: schema has no default", key)
			continue
		}
		got, err := getKey(d, key)
		if err != nil {
			t.Fatalf("Get(%s): %v", key, err)
		}
		if !jsonEqual(t, got, plain(want)) {
			t.Errorf("%s: config.Defaults() = %#v, schema default = %#v", key, got, want)
		}
	}
	for _, a := range config.Actions {
		v, ok := d.Guard.Decision(a)
		got, _ := getKey(d, "guard."+a)
		if !ok || v != got {
			t.Errorf("Guard.Decision(%s) = %q, %v; key says %v", a, v, ok, got)
		}
	}
	if _, ok := d.Guard.Decision("bogus"); ok {
		t.Error("Decision accepted an unknown action")
	}
	if d.Sandbox.Image != config.PlaceholderImage || d.Sandbox.HostTrustPolicy != config.HostCuratedOnly || d.Trust.MinimumTrustLevel != trust.LevelVerified ||
		d.Sandbox.HostConfinement != config.HostConfinementRequired {
		t.Errorf("insecure defaults: %+v", d)
	}
	if config.Defaults().Guard.ToolOverrides["x"] = (config.ToolOverride{Decision: config.Allow}); len(config.Defaults().Guard.ToolOverrides) != 0 {
		t.Error("Defaults() shares maps between calls")
	}
}

func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return bytes.Equal(ja, jb)
}

func TestSetupCreatesSecureDefaults(t *testing.T) {
	path := setUp(t)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("config mode = %04o, want 0600", fi.Mode().Perm())
	}
	di, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("dir mode = %04o, want 0700", di.Mode().Perm())
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, config.Defaults()) {
		t.Errorf("loaded %+v, want defaults", c)
	}
	// Every leaf key with a default is written out: the file setup writes
	// is complete. The optional ones (no default) are not written at all.
	raw := map[string]any{}
	if err := json.Unmarshal(readFile(t, path), &raw); err != nil {
		t.Fatal(err)
	}
	leaves, _, err := config.Keys()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range leaves {
		_, ok := config.LookupPath(raw, strings.Split(k.Name, "."))
		if optional := contains(optionalKeys, k.Name) || k.SDK != ""; !ok && !optional {
			t.Errorf("setup did not write %s", k.Name)
		} else if ok && optional {
			t.Errorf("setup wrote the optional key %s", k.Name)
		}
	}
	if _, ok := config.LookupPath(raw, []string{"guard", "max_permissions"}); ok {
		t.Error("setup wrote guard.max_permissions")
	}
	assertNoTemps(t, path)
}

func TestSetupKeepsValuesAndAddsMissingKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	// A valid file from an older version: changed values, some keys absent.
	writeFile(t, path, `{
  "trust": {"minimum_trust_level": "trusted"},
  "sandbox": {"backend": "podman", "limits": {"cpus": 2.5}},
  "guard": {"delete": "deny", "tool_overrides": {"acme-pack/search": "allow"}},
  "lockfile": {"strict": true},
  "audit": {},
  "agent_sandbox": {},
  "llm": {}
}`)
	created, added, err := Setup(path)
	if err != nil || created {
		t.Fatalf("Setup = %v, %v, %v", created, added, err)
	}
	for _, want := range []string{"guard.strict", "sandbox.limits.pids", "trust.keys", "audit.max_files", "agent_sandbox.llm.max_calls", "llm.providers"} {
		if !contains(added, want) {
			t.Errorf("added = %v, missing %s", added, want)
		}
	}
	for _, kept := range []string{"trust.minimum_trust_level", "sandbox.backend", "sandbox.limits.cpus", "guard.delete", "guard.tool_overrides", "lockfile.strict"} {
		if contains(added, kept) {
			t.Errorf("added lists %s, which the file had", kept)
		}
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Trust.MinimumTrustLevel != "trusted" || c.Sandbox.Backend != "podman" || c.Sandbox.Limits.CPUs != 2.5 ||
		c.Guard.Delete != config.Deny || c.Guard.ToolOverrides["acme-pack/search"].Decision != config.Allow || !c.Lockfile.Strict {
		t.Errorf("setup rewrote an existing value: %+v", c)
	}
	if c.Sandbox.Limits.Pids != 256 || c.Audit.MaxFiles != 5 {
		t.Errorf("missing keys did not get defaults: %+v", c)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %04o", fi.Mode().Perm())
	}

	// Now complete: a second setup changes nothing, not even bytes.
	before := readFile(t, path)
	created, added, err = Setup(path)
	if err != nil || created || added != nil {
		t.Fatalf("second Setup = %v, %v, %v", created, added, err)
	}
	if !bytes.Equal(before, readFile(t, path)) {
		t.Error("second setup rewrote the file")
	}
	assertNoTemps(t, path)
}

func TestSetupRefusesInvalidExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	bad := `{"trust":{},"sandbox":{"host_trust_policy":"curated-only"},"guard":{},"lockfile":{},"audit":{},"agent_sandbox":{},"llm":{}}`
	writeFile(t, path, bad)
	_, _, err := Setup(path)
	if !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), "sandbox.host_trust_policy") {
		t.Fatalf("err = %v", err)
	}
	if string(readFile(t, path)) != bad {
		t.Error("setup touched an invalid file")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// sections is a valid config with every leaf absent.
const sections = `"trust":{},"sandbox":{},"guard":{},"lockfile":{},"audit":{},"agent_sandbox":{},"llm":{}`

func TestAbsentLeafKeysTakeDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, path, "{"+sections+"}")
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, config.Defaults()) {
		t.Errorf("got %+v, want defaults", c)
	}
}

func TestLoadRefusesInvalidFiles(t *testing.T) {
	key := newKey(t)
	cases := []struct {
		name, content string
		want          []string // substrings of the message
	}{
		{"empty", ``, []string{"not valid JSON"}},
		{"corrupt", "{\n  \"trust\": {,\n}", []string{"not valid JSON at line 2"}},
		{"trailing data", "{" + sections + "} {}", []string{"not valid JSON"}},
		{"duplicate top-level key", `{"trust":{},"trust":{},` + sections[len(`"trust":{},`):] + `}`, []string{"trust: duplicate key"}},
		{"duplicate nested key", `{"trust":{"minimum_trust_level":"curated","minimum_trust_level":"unknown"},` + sections[len(`"trust":{},`):] + `}`,
			[]string{"trust.minimum_trust_level: duplicate key"}},
		{"not an object", `[]`, []string{"(top level)", "must be object"}},
		{"missing section", `{"trust":{},"sandbox":{},"guard":{},"lockfile":{},"audit":{},"agent_sandbox":{}}`, []string{"llm: required key is missing"}},
		{"unknown top-level key", `{` + sections + `,"telemetry":true}`, []string{"telemetry: unknown key"}},
		{"unknown nested key with suggestion", `{` + strings.Replace(sections, `"sandbox":{}`, `"sandbox":{"limits":{"memroy":"1g"}}`, 1) + `}`,
			[]string{"sandbox.limits.memroy: unknown key", "did you mean sandbox.limits.memory"}},
		{"misplaced key", `{` + sections + `,"minimum_trust_level":"verified"}`, []string{"did you mean trust.minimum_trust_level"}},
		{"wrong type", `{` + strings.Replace(sections, `"sandbox":{}`, `"sandbox":{"limits":{"pids":"256"}}`, 1) + `}`,
			[]string{"sandbox.limits.pids: must be integer, not string"}},
		{"fractional integer", `{` + strings.Replace(sections, `"sandbox":{}`, `"sandbox":{"limits":{"pids":256.5}}`, 1) + `}`,
			[]string{"sandbox.limits.pids"}},
		{"integral float for an integer", `{` + strings.Replace(sections, `"audit":{}`, `"audit":{"max_files":5.0}`, 1) + `}`,
			[]string{"audit.max_files"}},
		{"enum typo", `{` + strings.Replace(sections, `"sandbox":{}`, `"sandbox":{"host_trust_policy":"curated-only"}`, 1) + `}`,
			[]string{`sandbox.host_trust_policy: "curated-only" is not allowed`, "curated_only, default, none"}},
		{"guard decision", `{` + strings.Replace(sections, `"guard":{}`, `"guard":{"delete":"ask"}`, 1) + `}`,
			[]string{"guard.delete", "allow, prompt, deny"}},
		{"null value", `{` + strings.Replace(sections, `"guard":{}`, `"guard":{"strict":null}`, 1) + `}`,
			[]string{"guard.strict: must be boolean, not null"}},
		{"unpinned image", `{` + strings.Replace(sections, `"sandbox":{}`, `"sandbox":{"image":"agentnode/sandbox:latest"}`, 1) + `}`,
			[]string{"sandbox.image"}},
		{"bad size", `{` + strings.Replace(sections, `"sandbox":{}`, `"sandbox":{"limits":{"memory":"512MB"}}`, 1) + `}`,
			[]string{"sandbox.limits.memory"}},
		{"bad backend name", `{` + strings.Replace(sections, `"sandbox":{}`, `"sandbox":{"backend":"../evil"}`, 1) + `}`,
			[]string{"sandbox.backend"}},
		{"bad override name", `{` + strings.Replace(sections, `"guard":{}`, `"guard":{"tool_overrides":{"nopkg":"allow"}}`, 1) + `}`,
			[]string{"guard.tool_overrides.nopkg: invalid name"}},
		{"partial rate limit", `{` + strings.Replace(sections, `"guard":{}`, `"guard":{"rate_limits":{"acme-pack":{"per_minute":5}}}`, 1) + `}`,
			[]string{"guard.rate_limits.acme-pack.per_hour: required key is missing"}},
		{"duplicate inspector", `{` + strings.Replace(sections, `"guard":{}`, `"guard":{"inspectors":["builtin","builtin"]}`, 1) + `}`,
			[]string{"guard.inspectors"}},
		{"plain-http provider", `{` + strings.Replace(sections, `"llm":{}`, `"llm":{"providers":{"openai":{"api":"openai","base_url":"http://example.com/v1"}}}`, 1) + `}`,
			[]string{"llm.providers.openai.base_url"}},
		{"bad provider api", `{` + strings.Replace(sections, `"llm":{}`, `"llm":{"providers":{"x":{"api":"gemini"}}}`, 1) + `}`,
			[]string{"llm.providers.x.api", "openai, anthropic"}},
		{"short trust key", `{` + strings.Replace(sections, `"trust":{}`, `"trust":{"keys":[{"id":"k","public_key":"AAAA"}]}`, 1) + `}`,
			[]string{"trust.keys[0].public_key"}},
		{"duplicate trust key id", `{` + strings.Replace(sections, `"trust":{}`, `"trust":{"keys":[{"id":"k","public_key":"`+key+`"},{"id":"k","public_key":"`+key+`"}]}`, 1) + `}`,
			[]string{"trust.keys[1].id: duplicate key id"}},
	}
	dir := t.TempDir()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".json")
			writeFile(t, path, tc.content)
			_, err := config.Load(path)
			if !errors.Is(err, reason.ErrConfigInvalid) || reason.CodeOf(err) != reason.ConfigInvalid {
				t.Fatalf("err = %v, want config_invalid", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, path) {
				t.Errorf("message does not name the file: %s", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not contain %q", msg, w)
				}
			}
			// Setup refuses the same file and leaves it alone.
			if _, _, err := Setup(path); !errors.Is(err, reason.ErrConfigInvalid) {
				t.Errorf("Setup: err = %v", err)
			}
			if string(readFile(t, path)) != tc.content {
				t.Error("Setup changed an invalid file")
			}
		})
	}
}

func TestLoadRefusesUnsafeFiles(t *testing.T) {
	path := setUp(t)
	if err := os.Chmod(path, 0o620); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path); !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("group-writable: err = %v", err)
	}
	if err := os.Chmod(path, 0o602); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path); !errors.Is(err, reason.ErrConfigInvalid) {
		t.Errorf("world-writable: err = %v", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path); err != nil {
		t.Errorf("0644 should load: %v", err)
	}

	dir := filepath.Join(t.TempDir(), "config.json")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(dir); !errors.Is(err, reason.ErrConfigInvalid) {
		t.Errorf("directory: err = %v", err)
	}

	big := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, big, "{"+sections+"}"+strings.Repeat(" ", config.MaxFileSize))
	if _, err := config.Load(big); !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized: err = %v", err)
	}
}

func TestSetGetRoundTrip(t *testing.T) {
	path := setUp(t)
	zeroKey := base64.StdEncoding.EncodeToString(make([]byte, ed25519.PublicKeySize))
	cases := []struct {
		key, value string
		want       any
	}{
		{"trust.minimum_trust_level", "curated", "curated"},
		{"sandbox.host_trust_policy", "none", "none"},
		{"sandbox.host_confinement", "best_effort", "best_effort"},
		{"sandbox.host_confinement", "required", "required"},
		{"sandbox.backend", "my-backend", "my-backend"},
		{"sandbox.image", "registry.local:5000/agentnode/sandbox@sha256:" + strings.Repeat("ab", 32), "registry.local:5000/agentnode/sandbox@sha256:" + strings.Repeat("ab", 32)},
		{"sandbox.limits.memory", "1g", "1g"},
		{"sandbox.limits.pids", "64", int64(64)},
		{"sandbox.limits.cpus", "1.5", 1.5},
		{"sandbox.limits.cpus", "2", int64(2)},
		{"guard.delete", "deny", "deny"},
		{"guard.strict", "true", true},
		{"guard.strict", "false", false},
		{"lockfile.strict", "true", true},
		{"audit.max_size_mb", "20", int64(20)},
		{"agent_sandbox.llm.allowed_models", `["gpt-4o","claude-sonnet"]`, []any{"gpt-4o", "claude-sonnet"}},
		{"guard.inspectors", `["builtin","secrets-scan"]`, []any{"builtin", "secrets-scan"}},
		{"guard.tool_overrides", `{"acme-pack/search":"allow"}`, map[string]any{"acme-pack/search": "allow"}},
		{"guard.tool_overrides.acme-pack/v1.delete", "deny", "deny"},
		{"guard.rate_limits.acme-pack", `{"per_minute":5,"per_hour":100,"burst":2}`, map[string]any{"per_minute": int64(5), "per_hour": int64(100), "burst": int64(2)}},
		{"guard.rate_limits.acme-pack.burst", "3", int64(3)},
		{"llm.providers.local", `{"api":"openai","base_url":"http://localhost:11434/v1"}`, map[string]any{"api": "openai", "base_url": "http://localhost:11434/v1"}},
		{"llm.providers.local.api", "anthropic", "anthropic"},
		{"trust.keys", `[{"id":"me","public_key":"` + zeroKey + `"}]`, []any{map[string]any{"id": "me", "public_key": zeroKey}}},
	}
	for _, tc := range cases {
		if err := Set(path, tc.key, tc.value); err != nil {
			t.Errorf("Set(%s, %s): %v", tc.key, tc.value, err)
			continue
		}
		got, err := Get(path, tc.key)
		if err != nil {
			t.Errorf("Get(%s): %v", tc.key, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Get(%s) = %#v (%T), want %#v", tc.key, got, got, tc.want)
		}
	}
	// The earlier keys kept their values; the whole override map holds both.
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Guard.ToolOverrides["acme-pack/search"].Decision != config.Allow || c.Guard.ToolOverrides["acme-pack/v1.delete"].Decision != config.Deny {
		t.Errorf("tool_overrides = %v", c.Guard.ToolOverrides)
	}
	if c.Trust.MinimumTrustLevel != trust.LevelCurated || c.Sandbox.Limits.Pids != 64 || c.Guard.RateLimits["acme-pack"].Burst != 3 {
		t.Errorf("config = %+v", c)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after set = %04o", fi.Mode().Perm())
	}
	assertNoTemps(t, path)

	// A section can be read whole.
	limits, err := Get(path, "sandbox.limits")
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := limits.(map[string]any); !ok || m["memory"] != "1g" {
		t.Errorf("Get(sandbox.limits) = %#v", limits)
	}
	if _, err := Get(path, "guard.tool_overrides.other-pack/x"); !errors.Is(err, reason.ErrConfigInvalid) {
		t.Errorf("absent entry: err = %v", err)
	}
}

func TestSetRefusalsLeaveFileIdentical(t *testing.T) {
	path := setUp(t)
	cases := []struct {
		key, value string
		want       []string
	}{
		{"trust.minimum_level", "verified", []string{`unknown config key "trust.minimum_level"`, "did you mean trust.minimum_trust_level"}},
		{"minimum_trust_level", "verified", []string{"did you mean trust.minimum_trust_level"}},
		{"sandbox.limits.memory.x", "1", []string{"unknown config key"}},
		{"", "x", []string{"unknown config key"}},
		{"guard.", "x", []string{"unknown config key"}},
		{"sandbox.host_trust_policy", "curated-only", []string{"sandbox.host_trust_policy", `"curated-only" is not allowed`, "curated_only, default, none"}},
		{"sandbox.host_confinement", "best-effort", []string{"sandbox.host_confinement", `"best-effort" is not allowed`, "required, best_effort"}},
		{"sandbox.host_confinement", "off", []string{"sandbox.host_confinement", "required, best_effort"}},
		{"trust.minimum_trust_level", "high", []string{"trust.minimum_trust_level", "unknown, unverified, verified, trusted, curated"}},
		{"guard.strict", "yes", []string{"guard.strict", "true or false"}},
		{"sandbox.limits.pids", "many", []string{"sandbox.limits.pids", "an integer"}},
		{"sandbox.limits.pids", "0", []string{"sandbox.limits.pids"}},
		{"sandbox.limits.cpus", "NaN", []string{"sandbox.limits.cpus", "a number"}},
		{"sandbox.limits.cpus", "0", []string{"sandbox.limits.cpus"}},
		{"sandbox.image", "agentnode/sandbox:latest", []string{"sandbox.image"}},
		{"guard.inspectors", `["builtin",`, []string{"guard.inspectors", "not valid JSON"}},
		{"guard.inspectors", `{"a":1}`, []string{"guard.inspectors", "a JSON array"}},
		{"guard.tool_overrides", `{"a/b":"allow","a/b":"deny"}`, []string{"guard.tool_overrides", "duplicate key"}},
		{"guard.tool_overrides.nopkg", "allow", []string{"guard.tool_overrides.nopkg", "invalid name"}},
		{"guard.tool_overrides.acme-pack/x", "maybe", []string{"guard.tool_overrides.acme-pack/x", "allow, prompt, deny"}},
		{"guard.rate_limits.acme-pack.burst", "3", []string{"guard.rate_limits.acme-pack.per_minute: required key is missing"}},
		{"trust.keys", `[{"id":"a","public_key":"short"}]`, []string{"trust.keys[0].public_key"}},
	}
	before := readFile(t, path)
	for _, tc := range cases {
		err := Set(path, tc.key, tc.value)
		if !errors.Is(err, reason.ErrConfigInvalid) {
			t.Errorf("Set(%q, %q): err = %v, want config_invalid", tc.key, tc.value, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Set(%q, %q): message %q lacks %q", tc.key, tc.value, err, w)
			}
		}
		if !bytes.Equal(before, readFile(t, path)) {
			t.Fatalf("Set(%q, %q) changed the file", tc.key, tc.value)
		}
	}
	assertNoTemps(t, path)
}

func TestSetRepairsAnInvalidValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, path, `{`+strings.Replace(sections, `"sandbox":{}`, `"sandbox":{"host_trust_policy":"curated-only"}`, 1)+`}`)
	// Setting another key does not hide the problem.
	if err := Set(path, "guard.strict", "true"); !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), "sandbox.host_trust_policy") {
		t.Fatalf("err = %v", err)
	}
	if err := Set(path, "sandbox.host_trust_policy", "curated_only"); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path); err != nil {
		t.Fatal(err)
	}
}

func TestSetOnCorruptFileRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, path, `{"trust":`)
	if err := Set(path, "guard.strict", "true"); !errors.Is(err, reason.ErrConfigInvalid) {
		t.Fatalf("err = %v", err)
	}
	if string(readFile(t, path)) != `{"trust":` {
		t.Error("file changed")
	}
}

func TestSetFollowsSymlink(t *testing.T) {
	target := setUp(t)
	link := filepath.Join(t.TempDir(), "config.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := Set(link, "guard.strict", "true"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("symlink replaced: %v", err)
	}
	if c, err := config.Load(target); err != nil || !c.Guard.Strict {
		t.Fatalf("target not updated: %v", err)
	}
}

func TestWriteAtomicFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	// Renaming a file over a non-empty directory fails after the temporary
	// file has been written: the temporary must be removed.
	path := filepath.Join(dir, "config.json")
	if err := os.MkdirAll(filepath.Join(path, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(path, []byte("{}"), false); !errors.Is(err, reason.ErrConfigInvalid) {
		t.Fatalf("err = %v", err)
	}
	assertNoTemps(t, path)

	// Exclusive creation never replaces a file that is already there.
	file := filepath.Join(dir, "existing.json")
	writeFile(t, file, "keep")
	if err := writeAtomic(file, []byte("{}"), true); err == nil {
		t.Fatal("exclusive write replaced an existing file")
	}
	if string(readFile(t, file)) != "keep" {
		t.Error("existing file changed")
	}
	assertNoTemps(t, file)
}

func TestAddTrustKey(t *testing.T) {
	path := setUp(t)
	k1, k2 := newKey(t), newKey(t)
	if err := AddTrustKey(path, "issuer-1", k1); err != nil {
		t.Fatal(err)
	}
	if err := AddTrustKey(path, "issuer-2", k2); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, path)
	if err := AddTrustKey(path, "issuer-1", k1); err != nil {
		t.Fatalf("identical re-add: %v", err)
	}
	refusals := map[string][2]string{
		"different key for an id": {"issuer-1", k2},
		"not base64":              {"issuer-3", "not base64!"},
		"wrong length":            {"issuer-3", base64.StdEncoding.EncodeToString(make([]byte, 31))},
		"unpadded":                {"issuer-3", strings.TrimRight(k1, "=")},
		"bad id":                  {"../x", k1},
		"empty id":                {"", k1},
	}
	for name, args := range refusals {
		if err := AddTrustKey(path, args[0], args[1]); !errors.Is(err, reason.ErrConfigInvalid) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if !bytes.Equal(before, readFile(t, path)) {
		t.Error("a refused or repeated AddTrustKey changed the file")
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Trust.Keys) != 2 || c.Trust.Keys[0].ID != "issuer-1" || c.Trust.Keys[1].ID != "issuer-2" {
		t.Fatalf("keys = %+v", c.Trust.Keys)
	}
	pub, err := c.Trust.Keys[0].Ed25519()
	if err != nil || base64.StdEncoding.EncodeToString(pub) != k1 {
		t.Fatalf("Ed25519() = %v, %v", pub, err)
	}
}

func TestListIsSortedAndComplete(t *testing.T) {
	path := setUp(t)
	kvs, err := List(path)
	if err != nil {
		t.Fatal(err)
	}
	leaves, _, err := config.Keys()
	if err != nil {
		t.Fatal(err)
	}
	var own []string // without the AgentNode SDK's keys, which this file does not have
	for _, k := range leaves {
		if k.SDK == "" {
			own = append(own, k.Name)
		}
	}
	if len(kvs) != len(own) || len(own) == len(leaves) {
		t.Fatalf("List has %d keys, schema %d (%d without the SDK's)", len(kvs), len(leaves), len(own))
	}
	m := map[string]any{}
	for i, kv := range kvs {
		if i > 0 && kvs[i-1].Key >= kv.Key {
			t.Errorf("not sorted at %s", kv.Key)
		}
		m[kv.Key] = kv.Value
	}
	want := map[string]any{
		"trust.minimum_trust_level": "verified",
		"sandbox.limits.pids":       int64(256),
		"guard.strict":              false,
		"guard.inspectors":          []any{"builtin"},
		"guard.tool_overrides":      map[string]any{},
		"sandbox.image":             config.PlaceholderImage,
		"guard.unknown":             "prompt",
	}
	for k, v := range want {
		if !reflect.DeepEqual(m[k], v) {
			t.Errorf("%s = %#v, want %#v", k, m[k], v)
		}
	}
}

func TestSaveAndValidate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "config.json")
	c := config.Defaults()
	c.Guard.ToolOverrides = nil // nil counts as empty
	c.Guard.Execute = config.Deny
	if err := Save(path, c); err != nil {
		t.Fatal(err)
	}
	got, err := config.Load(path)
	if err != nil || got.Guard.Execute != config.Deny {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	c.Sandbox.HostTrustPolicy = "curated-only"
	if err := Save(path, c); !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), "sandbox.host_trust_policy") {
		t.Fatalf("Save invalid: err = %v", err)
	}
	if got, err := config.Load(path); err != nil || got.Sandbox.HostTrustPolicy != config.HostCuratedOnly {
		t.Fatalf("invalid Save wrote: %+v, %v", got, err)
	}
}

func TestParseSize(t *testing.T) {
	ok := map[string]int64{"512m": 512 << 20, "1g": 1 << 30, "64k": 64 << 10}
	for s, want := range ok {
		if got, err := config.ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "m", "0m", "012m", "-1m", "+1m", "1", "1t", "1M", "99999999999999999g"} {
		if _, err := config.ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) accepted", s)
		}
	}
	if n, err := config.Defaults().Sandbox.Limits.MemoryBytes(); err != nil || n != 512<<20 {
		t.Errorf("MemoryBytes = %d, %v", n, err)
	}
}

func TestMaxPermissionsOptionalCeiling(t *testing.T) {
	path := setUp(t)
	// Unset by default: Get says null (a section: {}), List lists it as nil.
	if v, err := Get(path, "guard.max_permissions.network"); err != nil || v != nil {
		t.Fatalf("unset network = %#v, %v", v, err)
	}
	if v, err := Get(path, "guard.max_permissions"); err != nil || !reflect.DeepEqual(v, map[string]any{}) {
		t.Fatalf("unset section = %#v, %v", v, err)
	}
	kvs, err := List(path)
	if err != nil {
		t.Fatal(err)
	}
	listed := 0
	for _, kv := range kvs {
		if strings.HasPrefix(kv.Key, "guard.max_permissions.") {
			listed++
			if kv.Value != nil {
				t.Errorf("List %s = %#v, want nil", kv.Key, kv.Value)
			}
		}
	}
	if listed != 3 {
		t.Errorf("List has %d guard.max_permissions keys, want 3", listed)
	}

	if err := Set(path, "guard.max_permissions.network", "none"); err != nil {
		t.Fatal(err)
	}
	if v, err := Get(path, "guard.max_permissions.network"); err != nil || v != "none" {
		t.Fatalf("network = %#v, %v", v, err)
	}
	if v, err := Get(path, "guard.max_permissions"); err != nil || !reflect.DeepEqual(v, map[string]any{"network": "none"}) {
		t.Fatalf("section = %#v, %v", v, err)
	}
	raw := map[string]any{}
	if err := json.Unmarshal(readFile(t, path), &raw); err != nil {
		t.Fatal(err)
	}
	if got, _ := config.LookupPath(raw, []string{"guard", "max_permissions"}); !reflect.DeepEqual(got, map[string]any{"network": "none"}) {
		t.Errorf("file holds guard.max_permissions = %#v; only the key that was set belongs there", got)
	}
	// Setup keeps it and, with nothing else missing, does not touch the file.
	before := readFile(t, path)
	if created, added, err := Setup(path); err != nil || created || added != nil {
		t.Fatalf("Setup = %v, %v, %v", created, added, err)
	}
	if !bytes.Equal(before, readFile(t, path)) {
		t.Error("setup rewrote a complete file")
	}

	if err := Set(path, "guard.max_permissions.filesystem", "workspace_read"); err != nil {
		t.Fatal(err)
	}
	if err := Set(path, "guard.max_permissions.code_execution", "limited_subprocess"); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := config.MaxPermissions{Network: "none", Filesystem: "workspace_read", CodeExecution: "limited_subprocess"}
	if c.Guard.MaxPermissions != want {
		t.Errorf("MaxPermissions = %+v, want %+v", c.Guard.MaxPermissions, want)
	}

	// The whole section at once; {} removes every limit.
	if err := Set(path, "guard.max_permissions", `{"network":"restricted"}`); err != nil {
		t.Fatal(err)
	}
	if c, err := config.Load(path); err != nil || c.Guard.MaxPermissions != (config.MaxPermissions{Network: "restricted"}) {
		t.Fatalf("after section set: %+v, %v", c, err)
	}
	if err := Set(path, "guard.max_permissions", `{}`); err != nil {
		t.Fatal(err)
	}
	if c, err := config.Load(path); err != nil || c.Guard.MaxPermissions != (config.MaxPermissions{}) {
		t.Fatalf("after {}: %+v, %v", c, err)
	}
	if strings.Contains(string(readFile(t, path)), "max_permissions") {
		t.Error("an empty ceiling is still written to the file")
	}
}

func TestMaxPermissionsInvalid(t *testing.T) {
	path := setUp(t)
	if err := Set(path, "guard.max_permissions.network", "restricted"); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, path)
	sets := []struct {
		key, value string
		want       []string
	}{
		{"guard.max_permissions.network", "everything", []string{"guard.max_permissions.network", `"everything" is not allowed`, "none, restricted, unrestricted"}},
		{"guard.max_permissions.network", "", []string{"guard.max_permissions.network", "none, restricted, unrestricted"}},
		{"guard.max_permissions.filesystem", "workspace", []string{"guard.max_permissions.filesystem", "none, temp, workspace_read, workspace_write, any"}},
		{"guard.max_permissions.code_execution", "subprocess", []string{"guard.max_permissions.code_execution", "none, limited_subprocess, shell"}},
		{"guard.max_permissions.disk", "none", []string{`unknown config key "guard.max_permissions.disk"`}},
		{"guard.max_permissions", `{"network":"none","net":"none"}`, []string{"guard.max_permissions.net: unknown key"}},
		{"guard.max_permissions", `["none"]`, []string{"guard.max_permissions", "a JSON object"}},
	}
	for _, tc := range sets {
		err := Set(path, tc.key, tc.value)
		if !errors.Is(err, reason.ErrConfigInvalid) || reason.CodeOf(err) != reason.ConfigInvalid {
			t.Errorf("Set(%s, %q): err = %v, want config_invalid", tc.key, tc.value, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Set(%s, %q): message %q lacks %q", tc.key, tc.value, err, w)
			}
		}
	}
	if !bytes.Equal(before, readFile(t, path)) {
		t.Fatal("a refused set changed the file")
	}

	files := map[string]string{
		`"max_permissions":{"network":"all"}`:     `guard.max_permissions.network: "all" is not allowed; allowed values: none, restricted, unrestricted`,
		`"max_permissions":{"filesystem":"TEMP"}`: `guard.max_permissions.filesystem: "TEMP" is not allowed`,
		`"max_permissions":{"network":null}`:      `guard.max_permissions.network: null is not allowed`,
		`"max_permissions":null`:                  `guard.max_permissions: must be object, not null`,
		`"max_permissions":{"shell":"none"}`:      `guard.max_permissions.shell: unknown key`,
	}
	dir := t.TempDir()
	i := 0
	for guard, want := range files {
		i++
		p := filepath.Join(dir, fmt.Sprintf("c%d.json", i))
		writeFile(t, p, `{`+strings.Replace(sections, `"guard":{}`, `"guard":{`+guard+`}`, 1)+`}`)
		_, err := config.Load(p)
		if !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want config_invalid with %q", guard, err, want)
		}
	}
}

// TestMaxPermissionsLevelsMatchSchema keeps the exported level ladders and
// the schema's enums the same, in order.
func TestMaxPermissionsLevelsMatchSchema(t *testing.T) {
	for key, levels := range map[string][]string{"network": config.NetworkLevels, "filesystem": config.FilesystemLevels, "code_execution": config.CodeExecutionLevels} {
		sk, err := lookupKey("guard.max_permissions." + key)
		if err != nil {
			t.Fatal(err)
		}
		enum, _ := sk.node["enum"].([]any)
		got := make([]string, len(enum))
		for i, v := range enum {
			got[i], _ = v.(string)
		}
		if !reflect.DeepEqual(got, levels) {
			t.Errorf("%s: schema enum %v, Go %v", key, got, levels)
		}
	}
}
