package keychain

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"

	"github.com/agentnode/agentnode/kernel/reason"
)

// TrustKeyUser is the keychain user of every trust signing key.
const TrustKeyUser = "ed25519"

// TrustKeyService is the keychain service of the trust signing key id:
// "agentnode-trust:<id>".
func TrustKeyService(id string) string { return "agentnode-trust:" + id }

// SetTrustKey stores the Ed25519 private key of trust signing key id as the
// standard base64 of its 32-byte seed.
func SetTrustKey(id string, priv ed25519.PrivateKey) error {
	if len(priv) != ed25519.PrivateKeySize {
		return fmt.Errorf("trust key %q: private key is %d bytes, want %d", id, len(priv), ed25519.PrivateKeySize)
	}
	return Set(TrustKeyService(id), TrustKeyUser, base64.StdEncoding.EncodeToString(priv.Seed()))
}

// TrustKey loads the private key of trust signing key id. A missing key is
// an error wrapping ErrNotFound. The error never contains the stored value.
func TrustKey(id string) (ed25519.PrivateKey, error) {
	s, err := Get(TrustKeyService(id), TrustKeyUser)
	if err != nil {
		return nil, err
	}
	seed, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, reason.New(reason.CredentialsMissing,
			"trust key %q in the OS keychain (service %s) is not the base64 of a %d-byte Ed25519 seed",
			id, TrustKeyService(id), ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}
