// Package kernel is the root of agentnode's trusted core: the fail-closed
// decision (kernel/dispatch) and the audit log (kernel/audit), and what
// they need that is neither a plugin, an executor nor a front end: the
// readers of config, lockfile and manifests, Guard's policy engine and rate
// limiter, the plugin host, the checks of installed packages and sandbox
// images, and one implementation of each safety primitive. Executors
// (executor/) run what it decides; cmd/agentnode is the front end. Each
// package's comment says why it belongs here.
//
// The kernel is Linux-only (the kernel keyring, fdatasync, file change
// stamps, a plugin's death signal); it has no stubs for other systems.
package kernel
