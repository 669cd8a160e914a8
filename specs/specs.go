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
