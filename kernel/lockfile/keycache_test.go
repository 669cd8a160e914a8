//go:build linux

package lockfile

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/kernel/keychain"
	"github.com/agentnode/agentnode/test/keychaintest"
)

func randomKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// noKeychainScope points the keychain at a session bus that does not exist:
// every keychain call fails with ErrUnavailable, and the cache has a scope
// of its own. It returns the scope.
func noKeychainScope(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/agentnode-keycache-"+hex.EncodeToString(b))
	scope, ok := keyCacheScope()
	if !ok {
		t.Fatal("no cache scope with a session bus address set")
	}
	t.Cleanup(func() { forgetCachedKeys(scope, "") })
	return scope
}

// cacheT caches key, skipping the test where the kernel has no usable
// keyring (agentnode then reads the keychain every time).
func cacheT(t *testing.T, key []byte) string {
	t.Helper()
	desc, err := CacheKey(key)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		t.Skipf("no kernel keyring here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return desc
}

// plantKey puts payload into @u under desc, as a process of the user
// could, with a timeout of a minute.
func plantKey(t *testing.T, desc string, payload []byte) {
	t.Helper()
	serial, err := unix.AddKey(keyCacheType, desc, payload, unix.KEY_SPEC_PROCESS_KEYRING)
	if err == nil {
		err = unix.KeyctlSetperm(serial, keyCachePerm)
	}
	if err == nil {
		_, err = unix.KeyctlInt(unix.KEYCTL_SET_TIMEOUT, serial, 60, 0, 0)
	}
	if err == nil {
		_, err = unix.KeyctlInt(unix.KEYCTL_LINK, serial, unix.KEY_SPEC_USER_KEYRING, 0, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// procKeysLine is the line of /proc/keys for the key described desc.
func procKeysLine(t *testing.T, desc string) string {
	t.Helper()
	data, err := os.ReadFile("/proc/keys")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasSuffix(line, " "+desc+": 32") {
			return line
		}
	}
	return ""
}

// TestKeyCacheAnswersForItsKeyID: with no keychain reachable, a cached key
// is still returned for its key_id (so it came from the kernel keyring),
// never for another key_id, never for "" (sealing anew reads the
// keychain), never from another keychain's scope, and never when the entry
// does not hold the key its description names.
func TestKeyCacheAnswersForItsKeyID(t *testing.T) {
	scope := noKeychainScope(t)
	k1 := randomKey(t)
	desc := cacheT(t, k1)
	if want := keyCachePrefix + KeyID(k1) + ":" + scope; desc != want {
		t.Fatalf("description %q, want %q", desc, want)
	}
	// In memory, with a timeout, readable by the owner only.
	line := procKeysLine(t, desc)
	f := strings.Fields(line)
	if len(f) < 9 || f[3] == "perm" || f[4] != fmt.Sprintf("%08x", keyCachePerm) {
		t.Fatalf("/proc/keys: %q: want a timeout and permissions %08x", line, keyCachePerm)
	}

	if k, err := LoadKeyFor(KeyID(k1)); err != nil || !bytes.Equal(k, k1) {
		t.Fatalf("cached key: %v", err)
	}
	unavailable := func(what string, k []byte, err error) {
		t.Helper()
		if k != nil || !errors.Is(err, keychain.ErrUnavailable) {
			t.Fatalf("%s: got a key or %v, want the keychain's ErrUnavailable", what, err)
		}
	}
	k, err := LoadKeyFor(KeyID(randomKey(t)))
	unavailable("another key_id", k, err)
	k, err = LoadKeyFor("")
	unavailable("no key_id", k, err)
	k, err = LoadOrCreateKeyFor("")
	unavailable("create", k, err)

	// A payload that is not the key its description names.
	k2 := randomKey(t)
	planted := keyCacheDescription(KeyID(k2), scope)
	plantKey(t, planted, k1)
	k, err = LoadKeyFor(KeyID(k2))
	unavailable("planted under another key_id", k, err)

	// Another keychain (another session bus) does not see it.
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", os.Getenv("DBUS_SESSION_BUS_ADDRESS")+"-other")
	k, err = LoadKeyFor(KeyID(k1))
	unavailable("another keychain's scope", k, err)
}

// TestKeyCacheRevokedEntry: an entry the kernel refuses to read (revoked)
// is a miss, not an error: the keychain is asked.
func TestKeyCacheRevokedEntry(t *testing.T) {
	noKeychainScope(t)
	k1 := randomKey(t)
	desc := cacheT(t, k1)
	serial, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, keyCacheType, desc, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.KeyctlInt(unix.KEYCTL_REVOKE, serial, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	if k, err := LoadKeyFor(KeyID(k1)); k != nil || !errors.Is(err, keychain.ErrUnavailable) {
		t.Fatalf("revoked entry: got a key or %v", err)
	}
}

// TestKeyCacheFollowsKeychain: the cache answers for the key it read until
// the keychain is read again; a read of the keychain replaces the cached
// key of that keychain, and a keychain without a key empties it.
func TestKeyCacheFollowsKeychain(t *testing.T) {
	keychaintest.Require(t)
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	saved := keychainService
	keychainService = "agentnode-lock-seal-test-" + hex.EncodeToString(b)
	scope, _ := keyCacheScope()
	t.Cleanup(func() {
		_ = keychain.Delete(keychainService, KeychainUser)
		forgetCachedKeys(scope, "")
		keychainService = saved
	})
	k1, err := LoadOrCreateKey()
	if err != nil {
		t.Fatal(err)
	}
	if cachedKey(KeyID(k1)) == nil {
		t.Skip("no kernel keyring here: the key was not cached")
	}
	// The keychain's key is replaced behind agentnode's back: the cache
	// still answers for k1 (which the keychain no longer holds) ...
	k2 := randomKey(t)
	if err := keychain.Set(keychainService, KeychainUser, base64.StdEncoding.EncodeToString(k2)); err != nil {
		t.Fatal(err)
	}
	if k, err := LoadKeyFor(KeyID(k1)); err != nil || !bytes.Equal(k, k1) {
		t.Fatalf("cached k1: %v", err)
	}
	// ... until agentnode reads the keychain: k2 replaces it.
	if k, err := LoadKey(); err != nil || !bytes.Equal(k, k2) {
		t.Fatalf("LoadKey: %v", err)
	}
	if cachedKey(KeyID(k1)) != nil || cachedKey(KeyID(k2)) == nil {
		t.Fatal("after reading k2 from the keychain, k1 is still cached or k2 is not")
	}
	if k, err := LoadKeyFor(KeyID(k1)); err != nil || !bytes.Equal(k, k2) {
		t.Fatalf("a seal naming k1 now gets the keychain's k2: %v", err)
	}
	// The keychain loses its key: nothing of it stays cached.
	if err := keychain.Delete(keychainService, KeychainUser); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(); !errors.Is(err, keychain.ErrNotFound) {
		t.Fatalf("LoadKey without a key: %v", err)
	}
	if cachedKey(KeyID(k2)) != nil {
		t.Fatal("k2 still cached after the keychain lost it")
	}
	if _, err := LoadKeyFor(KeyID(k2)); !errors.Is(err, keychain.ErrNotFound) {
		t.Fatalf("LoadKeyFor after the keychain lost its key: %v", err)
	}
}

func TestSealKeyInKeychain(t *testing.T) {
	keychaintest.Require(t)
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	saved := keychainService
	keychainService = "agentnode-lock-seal-test-" + hex.EncodeToString(b)
	scope, _ := keyCacheScope()
	t.Cleanup(func() {
		_ = keychain.Delete(keychainService, KeychainUser)
		forgetCachedKeys(scope, "")
		keychainService = saved
	})
	if _, err := LoadKey(); !errors.Is(err, keychain.ErrNotFound) {
		t.Fatalf("no key yet: %v", err)
	}
	k1, err := LoadOrCreateKey()
	if err != nil || len(k1) != KeySize {
		t.Fatalf("create: %v (%d bytes)", err, len(k1))
	}
	k2, err := LoadKey()
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("load: %v", err)
	}
	k3, err := LoadOrCreateKey()
	if err != nil || !bytes.Equal(k1, k3) {
		t.Fatalf("second LoadOrCreateKey made a new key: %v", err)
	}
	// A corrupted secret is refused without repeating it.
	if err := keychain.Set(keychainService, KeychainUser, "sk-live-SECRETMARKER42"); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(); err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("corrupt key: %v", err)
	}
	if _, err := LoadOrCreateKey(); err == nil {
		t.Fatal("a corrupt key was replaced")
	}
}
