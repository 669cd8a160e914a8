package lockfile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/agentnode/agentnode/kernel/keychain"
)

// The seal key cache. Reading the seal key from the OS keychain costs a few
// milliseconds (two D-Bus round trips to the Secret Service) in every
// process that needs it, and every `agentnode run` does (the audit anchor,
// a sealed lockfile). So a key read from the keychain is also kept, in
// memory only, in the Linux kernel's user keyring for KeyCacheTimeout, and
// LoadKeyFor and LoadOrCreateKeyFor take it from there (microseconds) when
// the seal they are asked about names it (specs/lockfile.md, "The seal key
// cache"):
//
//   - a cached key answers only for the key_id its seal names and is checked
//     against it (KeyID), so the cache can never make a seal verify under
//     another key than the one it names;
//   - an entry is scoped to one keychain (its service and the session bus it
//     was read through): several keychains of one user (test sessions) do
//     not see each other's keys;
//   - every read of the keychain refreshes the cache: it caches the key it
//     read and drops the cached keys of that keychain with another key_id;
//     a keychain that has no key (or a malformed or locked one) drops them
//     all;
//   - when the kernel keyring is unavailable (no keyctl, a seccomp filter,
//     a container without one) nothing is cached and the keychain is read,
//     as before; the cache never makes anything fail.

// KeyCacheTimeout is how long a seal key read from the keychain stays in
// the kernel keyring.
const KeyCacheTimeout = 10 * time.Minute

const keyCachePrefix = "agentnode:lock-seal:"

// keyCacheScope names the keychain a cached key belongs to: a hash of the
// keychain service and the session bus address; false without a session
// bus (then there is no keychain to stand for, and nothing is cached).
func keyCacheScope() (string, bool) {
	bus, err := keychain.SessionBus()
	if err != nil {
		return "", false
	}
	h := sha256.Sum256([]byte("agentnode seal key cache\n" + keychainService + "\n" + bus))
	return hex.EncodeToString(h[:8]), true
}

// LoadKeyFor returns the seal key for a seal that names key_id id: the
// cached key when there is one for id, else LoadKey (which may return a
// key with another id: the caller's seal check then says so). id "" reads
// the keychain.
func LoadKeyFor(id string) ([]byte, error) {
	if k := cachedKey(id); k != nil {
		return k, nil
	}
	return LoadKey()
}

// LoadOrCreateKeyFor is LoadKeyFor, but creates the key in the keychain
// when it has none (LoadOrCreateKey).
func LoadOrCreateKeyFor(id string) ([]byte, error) {
	if k := cachedKey(id); k != nil {
		return k, nil
	}
	return LoadOrCreateKey()
}

// CacheKey puts key into the kernel keyring cache (LoadKey does after every
// read of the keychain) and returns the key's description there. It fails
// without a session bus or a usable kernel keyring.
func CacheKey(key []byte) (string, error) { return cacheKey(key) }

// refreshKeyCache brings the cache in line with what a read of the
// keychain returned: its key, or an error. No keychain at all
// (keychain.ErrUnavailable) says nothing about the key and changes nothing.
func refreshKeyCache(key []byte, err error) {
	switch {
	case err == nil:
		_, _ = cacheKey(key)
	case !errors.Is(err, keychain.ErrUnavailable):
		if scope, ok := keyCacheScope(); ok {
			forgetCachedKeys(scope, "")
		}
	}
}
