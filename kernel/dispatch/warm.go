package dispatch

import (
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/trust"
)

// Plugins are started ahead of their first call, so that their launches
// (exec, initialization, the TLS handshake: the longest steps of a cold
// run) overlap other work. This file is the one place that does it:
// prestartPlugins is the only caller of pluginhost.Host.Prestart. Starting
// decides nothing: every plugin is pinned and checked where it is used,
// and one that is never called is only stopped with the rest.

// Warm starts, in the background, the trust and guard plugins the config
// names, before a request is even parsed. The config is only peeked at
// (config.Peek: not validated; any problem means nothing is started); the
// config stage loads and validates it as always.
func (k *Kernel) Warm() {
	if p, ok := config.Peek(k.configPath()); ok {
		k.prestartPlugins(p.Trust, p.Inspectors, "", "")
	}
}

// configPath is the config file: ConfigPath, else the home's.
func (k *Kernel) configPath() string {
	if k.ConfigPath != "" {
		return k.ConfigPath
	}
	return home.ConfigPath(k.HomeDir)
}

// prestartPlugins starts the named plugins in the background (a start
// already under way or done is left alone; "" starts nothing).
func (k *Kernel) prestartPlugins(trustPlugin string, inspectors []string, backend, broker string) {
	if k.Plugins == nil {
		return
	}
	if trustPlugin != "" {
		k.Plugins.Prestart(plugin.KindTrust, trustPlugin)
	}
	for _, name := range inspectors {
		k.Plugins.Prestart(plugin.KindGuard, name)
	}
	if backend != "" {
		k.Plugins.Prestart(plugin.KindSandbox, backend)
	}
	if broker != "" {
		k.Plugins.Prestart(plugin.KindBroker, broker)
	}
}

// prestart starts what the state known so far says the run will call; Run
// calls it after every decision stage. With the config: the trust plugin
// and the inspectors. With the package: the sandbox backend when the run
// will (or, by the trust plugin's earlier answer, likely will) be
// sandboxed. The agent executor starts the LLM broker ahead when the run
// has LLM access (services.PrestartBroker).
func (st *state) prestart() {
	if st.k.Plugins == nil || st.set == nil {
		return
	}
	if !st.prestarted.evaluators {
		st.prestarted.evaluators = true
		st.k.prestartPlugins(st.set.trustPlugin, st.set.inspectors, "", "")
	}
	pkg := st.pkg
	if pkg == nil {
		pkg = st.loaded
	}
	if pkg == nil || pkg.ID != st.req.Package || st.prestarted.pkg {
		return
	}
	st.prestarted.pkg = true
	if st.likelySandboxed(pkg.ID, pkg.Version, pkg.ArtifactHash, pkg.Manifest.PackageType) {
		st.k.prestartPlugins("", nil, st.set.backend, "")
	}
}

// hostEligible is the placement rule for a trust tier (stagePlacement):
// curated goes on the host unless sandbox.host_trust_policy is none,
// trusted only under the policy default, every other tier to the sandbox.
// It takes the tier from the trust plugin's answer, never from the
// package's attestations.
func hostEligible(level, hostTrustPolicy string) bool {
	switch level {
	case trust.LevelCurated:
		return hostTrustPolicy != "none"
	case trust.LevelTrusted:
		return hostTrustPolicy == "default"
	}
	return false
}

// sandboxedByTrust is the kind of the verdict-cache entry (kernel/validcache)
// that remembers the trust plugin's answer put this very package in the
// sandbox: a prestart hint for its next run, never a decision.
const sandboxedByTrust = "placement-sandboxed-by-trust"

// likelySandboxed says whether the run will (an agent; a host trust policy
// of none) or likely will be sandboxed: the trust plugin's answer for this
// package, version, artifact and policy placed it in the sandbox before
// (rememberPlacement). A wrong hint costs a plugin start or a late one.
func (st *state) likelySandboxed(id, version, artifactHash, pkgType string) bool {
	if pkgType == manifest.TypeAgent || st.set.hostTrustPolicy == "none" {
		return true
	}
	return st.k.verdicts().Valid(sandboxedByTrust, placementKey(st.set, id, version, artifactHash)...)
}

// rememberPlacement keeps the hint likelySandboxed reads: that the trust
// plugin's answer placed this package in the sandbox.
func (st *state) rememberPlacement() {
	if hostEligible(st.res.Trust, st.set.hostTrustPolicy) {
		return
	}
	st.k.verdicts().Remember(sandboxedByTrust, placementKey(st.set, st.pkg.ID, st.pkg.Version, st.pkg.ArtifactHash)...)
}

func placementKey(set *settings, id, version, artifactHash string) [][]byte {
	return [][]byte{[]byte(set.trustPlugin), []byte(set.hostTrustPolicy), []byte(id), []byte(version), []byte(artifactHash)}
}
