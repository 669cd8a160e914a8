package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"

	"github.com/agentnode/agentnode/kernel/keychain"
	"github.com/agentnode/agentnode/kernel/reason"
)

// The trust signing keys of `agentnode trust keygen|attest` in the OS
// keychain. They are here, not in kernel/keychain, because only those
// commands use them: a run verifies attestations with the public keys in
// config.json.

// trustKeyUser is the keychain user of every trust signing key.
const trustKeyUser = "ed25519"

// trustKeyService is the keychain service of the trust signing key id:
// "agentnode-trust:<id>".
func trustKeyService(id string) string { return "agentnode-trust:" + id }

// setTrustKey stores the Ed25519 private key of trust signing key id as the
// standard base64 of its 32-byte seed.
func setTrustKey(id string, priv ed25519.PrivateKey) error {
	if len(priv) != ed25519.PrivateKeySize {
		return fmt.Errorf("trust key %q: private key is %d bytes, want %d", id, len(priv), ed25519.PrivateKeySize)
	}
	return keychain.Set(trustKeyService(id), trustKeyUser, base64.StdEncoding.EncodeToString(priv.Seed()))
}

// trustKey loads the private key of trust signing key id. A missing key is
// an error wrapping keychain.ErrNotFound. The error never contains the stored value.
func trustKey(id string) (ed25519.PrivateKey, error) {
	s, err := keychain.Get(trustKeyService(id), trustKeyUser)
	if err != nil {
		return nil, err
	}
	seed, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, reason.New(reason.CredentialsMissing,
			"trust key %q in the OS keychain (service %s) is not the base64 of a %d-byte Ed25519 seed",
			id, trustKeyService(id), ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}
