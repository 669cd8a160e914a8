package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/dispatch"
)

func guardHome(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AGENTNODE_HOME", dir)
	t.Setenv("AGENTNODE_CONFIG", "")
	t.Setenv("AGENTNODE_GUARD_STRICT", "")
	if _, _, err := configedit.Setup(filepath.Join(dir, "config.json")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestGuardSet(t *testing.T) {
	dir := guardHome(t)
	cfg := filepath.Join(dir, "config.json")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"guard", "set", "destroy", "deny"}, `unknown action type "destroy"`},
		{[]string{"guard", "set", "delete", "Deny"}, `"Deny" is not a verdict`},
		{[]string{"guard", "set", "delete", ""}, `"" is not a verdict`},
		{[]string{"guard", "set", "strict", "true"}, `unknown action type "strict"`},
		{[]string{"guard", "set", "tool_overrides.x/y", "deny"}, "unknown action type"},
	} {
		before, _ := os.ReadFile(cfg)
		code, _, stderr := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
		if after, _ := os.ReadFile(cfg); !bytes.Equal(before, after) {
			t.Errorf("%v changed the config", c.args)
		}
	}
	for _, a := range config.Actions {
		code, stdout, stderr := runCLI(t, "guard", "set", a, "deny")
		if code != 0 || stdout != "guard."+a+" = deny\n" {
			t.Fatalf("guard set %s deny: exit %d %q %q", a, code, stdout, stderr)
		}
		if v, err := configedit.Get(cfg, "guard."+a); err != nil || v != "deny" {
			t.Fatalf("guard.%s = %v (%v)", a, v, err)
		}
	}
}

func TestGuardPolicyJSON(t *testing.T) {
	dir := guardHome(t)
	if err := configedit.Set(filepath.Join(dir, "config.json"), "guard.execute", "deny"); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "guard", "policy", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var p GuardPolicy
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range p.Actions {
		got[a.Action] = a.Verdict + "/" + a.Source
	}
	if got["execute"] != "deny/config" || got["delete"] != "prompt/default" || len(got) != len(config.Actions) {
		t.Fatalf("actions %v", got)
	}
	if p.Strict || !p.OverridesApply || p.RateLimits.Defaults["toolpack"].PerMinute != 60 {
		t.Fatalf("policy %+v", p)
	}

	t.Setenv("AGENTNODE_GUARD_STRICT", "1")
	_, stdout, _ = runCLI(t, "guard", "policy", "--json")
	p = GuardPolicy{}
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Actions {
		if a.Source != "strict" || (a.Action == "execute" && a.Verdict != "deny") || (a.Action == "write_local" && a.Verdict != "prompt") {
			t.Fatalf("strict action %+v", a)
		}
	}
	if !p.Strict || p.OverridesApply || p.RateLimits.Defaults["agent"].PerHour != 500 {
		t.Fatalf("strict policy %+v", p)
	}
}

func TestGuardPolicyShowsCeiling(t *testing.T) {
	dir := guardHome(t)
	k := &dispatch.Kernel{HomeDir: dir}
	p, err := guardPolicy(k)
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxPermissions != (MaxPermissions{}) {
		t.Errorf("unset ceiling shown as %+v", p.MaxPermissions)
	}
	if err := configedit.Set(filepath.Join(dir, "config.json"), "guard.max_permissions", `{"network":"none","code_execution":"limited_subprocess"}`); err != nil {
		t.Fatal(err)
	}
	if p, err = guardPolicy(k); err != nil {
		t.Fatal(err)
	}
	if want := (MaxPermissions{Network: "none", CodeExecution: "limited_subprocess"}); p.MaxPermissions != want {
		t.Errorf("MaxPermissions = %+v, want %+v", p.MaxPermissions, want)
	}
}

func TestGuardCheckTarget(t *testing.T) {
	for arg, ok := range map[string]bool{
		"acme-pack/search": true, "abc/x": true, "acme-pack/a.b-c_d": true,
		"acme-pack": false, "ab/x": false, "Acme/x": false, "acme-pack/": false, "/x": false,
		"acme-pack/a/b": false, "acme-pack/a b": false, "acme_pack/x": false,
	} {
		if got := checkTarget.MatchString(arg); got != ok {
			t.Errorf("%q: match %v, want %v", arg, got, ok)
		}
	}
}
