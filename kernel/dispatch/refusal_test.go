package dispatch

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/kernel/validcache"
)

// TestBadInputIsRefusedBeforeTheDecision: an input no tool can be given
// (invalid UTF-8, not an object, too large) is an input_denied refusal of
// the decision stages, not an allowed run that fails later.
func TestBadInputIsRefusedBeforeTheDecision(t *testing.T) {
	toolpack := &store.Package{Manifest: &manifest.Manifest{PackageType: manifest.TypeToolpack}}
	mcpPkg := &store.Package{Manifest: &manifest.Manifest{PackageType: manifest.TypeMCPServer}}
	cases := []struct {
		pkg   *store.Package
		input string
		ok    bool
	}{
		{toolpack, `{"q":"x"}`, true},
		{toolpack, "{\"q\":\"\xff\"}", false},
		{toolpack, `[1]`, false},
		{toolpack, ``, false},
		{toolpack, `{"q":"` + strings.Repeat("a", 1<<20) + `"}`, false},
		{mcpPkg, ``, true}, // called with {}
		{mcpPkg, "{\"q\":\"\xff\"}", false},
	}
	for _, c := range cases {
		err := checkInput(c.pkg, json.RawMessage(c.input))
		if c.ok != (err == nil) || err != nil && !errors.Is(err, reason.ErrInputDenied) {
			t.Errorf("%s input %.20q: err = %v", c.pkg.Manifest.PackageType, c.input, err)
		}
	}
}

// TestBadLimitsAreAConfigError: limits the backends' profile refuses are
// config_invalid when the config is read, before any decision.
func TestBadLimitsAreAConfigError(t *testing.T) {
	k := newHome(t)
	path := home.ConfigPath(k.HomeDir)
	if _, err := loadSettings(path, nil, validcache.Open(t.TempDir())); err != nil {
		t.Fatalf("default config: %v", err)
	}
	// Written into the file directly: `config set` refuses them already.
	for key, value := range map[string]any{"memory": "1m", "cpus": 0.001} {
		k := newHome(t)
		path := home.ConfigPath(k.HomeDir)
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		doc["sandbox"].(map[string]any)["limits"].(map[string]any)[key] = value
		if raw, err = json.Marshal(doc); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = loadSettings(path, nil, validcache.Open(t.TempDir()))
		if !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), "sandbox.limits") {
			t.Errorf("sandbox.limits.%s=%v: err = %v, want config_invalid naming sandbox.limits", key, value, err)
		}
	}
}
