// Package specs embeds the formats agentnode reads and writes, so the code
// validates against exactly the documents in this folder: JSON Schemas in
// schema/, the sandbox profile in sandbox/, the seccomp profile in seccomp/.
// The wire contract (proto/) is compiled into sdk/proto instead.
package specs

import "embed"

// Schemas holds specs/schema/*.json.
//
//go:embed schema/*.json
var Schemas embed.FS

// Sandbox holds specs/sandbox/*.json: profile.json, the hardened OCI
// runtime-spec profile every sandbox backend honours. Read it through
// sdk/sandbox/profile, which also fills in the seccomp profile.
//
//go:embed sandbox/*.json
var Sandbox embed.FS

// Seccomp holds specs/seccomp/*.json: agentnode.json, the sandbox's seccomp
// profile in Docker's format (also accepted by Podman). sdk/sandbox/profile
// converts it to the runtime-spec's LinuxSeccomp.
//
//go:embed seccomp/*.json
var Seccomp embed.FS
