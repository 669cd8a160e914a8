package lockfile

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/agentnode/agentnode/kernel/keychain"
	"github.com/agentnode/agentnode/kernel/reason"
)

// The keyed seal.
const (
	// AlgorithmSeal is the seal's algorithm member.
	AlgorithmSeal = "hmac-sha256"
	// KeySize is the seal key's length in bytes.
	KeySize = 32
	// KeychainService and KeychainUser locate the seal key in the OS
	// keychain; the secret is the standard base64 of the key.
	KeychainService = "agentnode-lock-seal"
	KeychainUser    = "key"
)

// keychainService is KeychainService; tests use their own.
var keychainService = KeychainService

// KeyID names a seal key without revealing it: the first 16 hex digits of
// SHA-256("agentnode.lock seal key\n" || key).
func KeyID(key []byte) string {
	h := sha256.New()
	h.Write([]byte("agentnode.lock seal key\n"))
	h.Write(key)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// SealInput is what the seal authenticates: the canonical JSON of the whole
// document without its _agentnode_seal member.
func SealInput(d *Document) []byte {
	root := &Value{Kind: Object, Obj: make([]Member, 0, len(d.Root.Obj))}
	for _, m := range d.Root.Obj {
		if m.Key != FieldSeal {
			root.Obj = append(root.Obj, m)
		}
	}
	return Canonical(root)
}

// SealHash is the hex HMAC-SHA256 of SealInput under key.
func SealHash(d *Document, key []byte) string { return MAC(key, SealInput(d)) }

// MAC is the keyed seal itself: the lower-case hex HMAC-SHA256 of msg under
// key. The lockfile seal and the audit anchor (kernel/audit) both use it with
// the one seal key; their inputs cannot be taken for each other, since a
// lockfile's is canonical JSON (it starts with "{") and the anchor's starts
// with its own label.
func MAC(key, msg []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(msg)
	return hex.EncodeToString(mac.Sum(nil))
}

// MACEqual compares two hex MACs in constant time.
func MACEqual(a, b string) bool { return hmac.Equal([]byte(a), []byte(b)) }

// Sealed reports whether d carries a seal member.
func (d *Document) Sealed() bool { return d.Root.Get(FieldSeal) != nil }

// SealKeyID is the key_id d's seal names ("" if there is none).
func (d *Document) SealKeyID() string {
	if s := d.Root.Get(FieldSeal); s != nil {
		if id := s.Get("key_id"); id != nil && id.Kind == String {
			return id.Str
		}
	}
	return ""
}

// LoadKey reads the seal key from the OS keychain and refreshes the seal
// key cache (keycache.go) with what it found. A missing key is an error
// wrapping keychain.ErrNotFound. Errors never contain the secret.
func LoadKey() ([]byte, error) {
	key, err := loadKeychainKey()
	refreshKeyCache(key, err)
	return key, err
}

func loadKeychainKey() ([]byte, error) {
	s, err := keychain.Get(keychainService, KeychainUser)
	if err != nil {
		return nil, err
	}
	key, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(key) != KeySize {
		return nil, reason.New(reason.CredentialsMissing,
			"the lockfile seal key in the OS keychain (service %s) is not the base64 of %d bytes", keychainService, KeySize)
	}
	return key, nil
}

// LoadOrCreateKey reads the seal key, creating 32 random bytes in the OS
// keychain when there is none yet (and caching them, as LoadKey does).
func LoadOrCreateKey() ([]byte, error) {
	key, err := LoadKey()
	if err == nil || !errors.Is(err, keychain.ErrNotFound) {
		return key, err
	}
	key = make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generate the lockfile seal key: %w", err)
	}
	if err := keychain.Set(keychainService, KeychainUser, base64.StdEncoding.EncodeToString(key)); err != nil {
		return nil, err
	}
	refreshKeyCache(key, nil)
	return key, nil
}
