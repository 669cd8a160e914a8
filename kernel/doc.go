// Package kernel is the root of agentnode's trusted core: the fail-closed
// dispatch pipeline and everything it needs that is not a plugin (audit,
// config, plugin host, package store, host executor). The CLI in cmd/agentnode
// is a thin layer over these packages.
package kernel
