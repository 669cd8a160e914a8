// Command agentnode-guard-builtin is the bundled Guard inspector. It applies
// AgentNode's argument inspection to every tool call's input:
//
// Deny: parent-directory traversal (../, ..\ and their percent-encoded
// forms), absolute paths (/..., ~/..., C:\..., \\server, file: URLs), a URL
// when the package declares network "none" (unless the property's schema says
// format "uri"), a payload over 1 MiB, a string over 1,000,000 characters,
// nesting deeper than 20, more than 10,000 object keys in total, duplicate
// object keys, secret-looking values (API keys, private keys, JWTs), input
// that is not a single JSON document and an input schema that does not
// compile.
//
// Prompt: shell tokens (; & | ` $) outside free-text fields, and violations
// of the tool's input_schema.
//
// Deny beats prompt; with no finding the call is allowed. Every reason names
// the rule and the JSON path of the offending value, never the value.
//
// Like every bundled plugin it imports only sdk/, the standard library and
// third-party libraries.
package main

import (
	"github.com/agentnode/agentnode/sdk/guard"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// info describes this plugin to the host.
func info() plugin.Info {
	return plugin.Info{Name: "builtin", Kind: plugin.KindGuard, Version: version}
}

func main() {
	guard.Serve(info(), NewInspector())
}
