package dispatch

import (
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// Warm starts, in the background, the trust and guard plugins the config
// names, before a request is even parsed: a plugin's start (exec, its own
// initialization, the TLS handshake) is the longest step of a cold run, and
// the earlier it begins, the more of it overlaps the caller's own set-up.
//
// Warm decides nothing and trusts nothing it reads: the config is only
// peeked at (config.Peek: not validated; any problem means nothing is
// started), a started plugin is pinned and checked like any other, and the
// config stage loads and validates the config as always. A plugin the
// validated config does not name is never called, only stopped with the
// rest.
func (k *Kernel) Warm() {
	if p, ok := config.Peek(k.configPath()); ok {
		k.prestartEvaluators(p.Trust, p.Inspectors)
	}
}

// configPath is the config file: ConfigPath, else the home's.
func (k *Kernel) configPath() string {
	if k.ConfigPath != "" {
		return k.ConfigPath
	}
	return home.ConfigPath(k.HomeDir)
}

// prestartEvaluators starts the trust plugin and the inspectors in the
// background (a start already under way or done is left alone), so that
// their launches overlap other work. Starting decides nothing: every result
// is still checked where it is used.
func (k *Kernel) prestartEvaluators(trust string, inspectors []string) {
	if k.Plugins == nil {
		return
	}
	if trust != "" {
		k.Plugins.Prestart(plugin.KindTrust, trust)
	}
	for _, name := range inspectors {
		k.Plugins.Prestart(plugin.KindGuard, name)
	}
}
