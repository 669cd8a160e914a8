package dispatch

import (
	"encoding/json"
	"os"

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
// peeked at (not validated; any problem means nothing is started), a
// started plugin is pinned and checked like any other, and the config stage
// loads and validates the config as always. A plugin the validated config
// does not name is never called, only stopped with the rest.
func (k *Kernel) Warm() {
	if k.Plugins == nil {
		return
	}
	path := k.ConfigPath
	if path == "" {
		path = home.ConfigPath(k.HomeDir)
	}
	data, err := os.ReadFile(path)
	if err != nil || len(data) > config.MaxFileSize {
		return
	}
	var peek struct {
		Trust struct {
			Plugin string `json:"plugin"`
		} `json:"trust"`
		Guard struct {
			Inspectors []string `json:"inspectors"`
		} `json:"guard"`
	}
	if json.Unmarshal(data, &peek) != nil {
		return
	}
	if peek.Trust.Plugin != "" {
		k.Plugins.Prestart(plugin.KindTrust, peek.Trust.Plugin)
	}
	for _, name := range peek.Guard.Inspectors {
		k.Plugins.Prestart(plugin.KindGuard, name)
	}
}
