// Command agentnode-guard-builtin is the bundled Guard inspector. It applies
// AgentNode's argument inspection to every tool call's input, looking at
// every string value and every object key (also after percent-decoding,
// any number of times):
//
// Deny: parent-directory traversal (../, ..\, a bare ".."), absolute paths
// (/..., \\server, ~/..., ~user/..., C:\..., a file: URL), a URL
// (scheme://) when the package declares network "none" (or no or an unknown
// level) unless the value's schema says format "uri" (or uri-reference, iri,
// iri-reference), a payload over 1 MiB, a string over 1,000,000 characters,
// nesting deeper than 20, more than 10,000 object keys in total, a repeated
// key in one object, secret-looking values (OpenAI, Anthropic, AWS, GitHub,
// Slack, Stripe live and Google keys, private key PEM headers, JWTs), input
// that is not exactly one JSON document, and an input schema that does not
// parse or, as the host reports (guard.InspectRequest.SchemaCheck), does not
// compile (external $refs are refused).
//
// Prompt: shell tokens (; & | ` $) outside free-text fields, and violations
// of the tool's input_schema (JSON Schema, draft 2020-12 unless $schema says
// otherwise) as the host found them (sdk/guard/schemacheck; this plugin
// links no validator: its initialization alone would cost ~5 ms of every
// start). A schema the host did not check prompts too. A string is free text when a schema that applies to it
// declares type string and none gives it a maxLength below 1000, an enum or
// a const; a value without a schema and an object key are never free text
// (a "$name" key such as "$ref" or "$gt" is not taken for shell syntax).
//
// Deny beats prompt; with no finding the call is allowed. Every reason names
// the rule and the JSON path of the offending value ($.a.b[2]), never the
// value; a key is shown in a path only when it is a plain identifier or a
// property the schema declares, and never when it is the offending value.
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
