// Command agentnode-trust-attest is the bundled trust plugin. It grants a
// package version the highest trust level among its Ed25519-signed
// attestations that verify against the pinned issuer keys, match the
// package id, version and installed artifact hash, and are within their
// validity period; otherwise "unknown" with a reason (specs/attestation.md).
//
// Like every bundled plugin it imports only sdk/ and the standard library.
package main

import (
	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/trust"
	"github.com/agentnode/agentnode/sdk/trust/attestation"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// info describes this plugin to the host.
func info() plugin.Info { return plugin.Info{Name: "attest", Kind: plugin.KindTrust, Version: version} }

func main() {
	trust.Serve(info(), attestation.Evaluator{})
}
