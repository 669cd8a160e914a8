package dispatch

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentnode/agentnode/cmd/agentnode/plugincat"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// Warm starts the plugins the config names (the default config: the attest
// trust plugin and the builtin inspector) before any stage runs, and starts
// nothing when the config cannot be read as JSON.
func TestWarmPrestartsTheConfiguredPlugins(t *testing.T) {
	bin := t.TempDir()
	for pkg, file := range map[string]string{
		"github.com/agentnode/agentnode/plugins/trust/attest":  "agentnode-trust-attest",
		"github.com/agentnode/agentnode/plugins/guard/builtin": "agentnode-guard-builtin",
	} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, file), pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	k := newHome(t)
	if _, err := plugincat.PinBundled(k.HomeDir, bin); err != nil {
		t.Fatal(err)
	}
	newHost := func() *pluginhost.Host {
		h := pluginhost.New(pluginhost.Options{HomeDir: k.HomeDir, BinDir: bin, Logger: hclog.NewNullLogger()})
		t.Cleanup(h.Close)
		return h
	}
	running := func(h *pluginhost.Host, kind, name string) bool {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if h.PID(kind, name) > 0 {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
		return false
	}

	k.Plugins = newHost()
	k.Warm()
	if !running(k.Plugins, plugin.KindTrust, "attest") || !running(k.Plugins, plugin.KindGuard, "builtin") {
		t.Fatal("Warm did not start the configured trust plugin and inspector")
	}

	// A config that is not JSON: nothing is started (the config stage
	// refuses it later, as always).
	if err := os.WriteFile(home.ConfigPath(k.HomeDir), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	k.Plugins = newHost()
	k.Warm()
	time.Sleep(300 * time.Millisecond)
	if k.Plugins.PID(plugin.KindTrust, "attest") != 0 || k.Plugins.PID(plugin.KindGuard, "builtin") != 0 {
		t.Fatal("Warm started plugins for an unreadable config")
	}
}
