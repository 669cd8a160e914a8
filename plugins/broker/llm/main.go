// Command agentnode-broker-llm is the bundled LLM broker plugin: it makes the
// model calls of sandboxed agents on the host, so provider credentials never
// enter the sandbox or the kernel's requests.
//
// Each call names a provider; the kernel sends the provider's API
// ("openai": OpenAI-compatible chat completions, "anthropic": messages) and
// base URL from config.json (llm.providers) and the effective ceilings. The
// broker reads the credential from the OS keychain itself (service
// agentnode:<provider>, user token, through the Secret Service on the D-Bus
// session bus — the only host environment this plugin gets), enforces the
// ceilings again (allowed models and input size before the call, output
// size on the reply), and answers with the reply and its usage.
//
// Errors are generic by construction: they name the provider and an HTTP
// status class, never the credential and never the provider's response
// text. Nothing logs message content; the plugin logs usage only.
//
// Like every bundled plugin it imports only sdk/ and third-party libraries.
package main

import (
	"github.com/agentnode/agentnode/sdk/broker"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// info describes this plugin to the host.
func info() plugin.Info { return plugin.Info{Name: "llm", Kind: plugin.KindBroker, Version: version} }

func main() {
	// Created before Serve, which redirects os.Stderr: this logger writes
	// to the real stderr, which the host forwards into its own log.
	logger := plugin.NewLogger("broker-llm")
	broker.Serve(info(), newBroker(logger, keychainGet))
}
