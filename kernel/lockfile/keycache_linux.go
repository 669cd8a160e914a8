package lockfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// The seal key cache on Linux: a key of type "user" in the user keyring
// (@u) of the kernel, described keyCachePrefix + key_id + ":" + scope,
// holding the 32 bytes of the key, timing out after KeyCacheTimeout.
//
// The key is created in the process keyring (which the process possesses),
// given its permissions and timeout there, then linked into @u (replacing
// an entry of the same description) and unlinked from the process keyring:
// added to @u directly, a process that does not possess @u (a session
// keyring that does not link it, as systemd gives services) could neither
// set the timeout nor read the key back.
//
// Permissions: all for a possessor; view, read and search for processes of
// the same uid (the owner), so that a process possessing no keyring that
// links @u can still read it; nothing for the group or anyone else.
const (
	keyCacheType = "user"
	keyCachePerm = 0x3f000000 | // KEY_POS_ALL
		0x00010000 | 0x00020000 | 0x00080000 // KEY_USR_VIEW | KEY_USR_READ | KEY_USR_SEARCH
)

func keyCacheDescription(id, scope string) string { return keyCachePrefix + id + ":" + scope }

// cachedKey returns the cached key whose KeyID is id, or nil: not cached,
// expired, no kernel keyring (ENOSYS, EPERM under a seccomp filter, no
// keyring in this container), or a payload that is not that key.
func cachedKey(id string) []byte {
	scope, ok := keyCacheScope()
	if !ok || id == "" {
		return nil
	}
	serial, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, keyCacheType, keyCacheDescription(id, scope), 0)
	if err != nil {
		return nil
	}
	buf := make([]byte, KeySize+1)
	n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, serial, buf, 0)
	if err != nil || n != KeySize {
		return nil
	}
	key := buf[:KeySize]
	if KeyID(key) != id {
		return nil
	}
	return key
}

// cacheKey puts key into the cache and drops the cached keys of this
// keychain (scope) with another key_id: the keychain holds key now.
func cacheKey(key []byte) (string, error) {
	scope, ok := keyCacheScope()
	if !ok {
		return "", errNoKeyCacheScope
	}
	desc := keyCacheDescription(KeyID(key), scope)
	serial, err := unix.AddKey(keyCacheType, desc, key, unix.KEY_SPEC_PROCESS_KEYRING)
	if err != nil {
		return "", fmt.Errorf("add_key: %w", err)
	}
	fail := func(what string, err error) (string, error) {
		_, _ = unix.KeyctlInt(unix.KEYCTL_INVALIDATE, serial, 0, 0, 0)
		return "", fmt.Errorf("keyctl %s: %w", what, err)
	}
	if err := unix.KeyctlSetperm(serial, keyCachePerm); err != nil {
		return fail("setperm", err)
	}
	if _, err := unix.KeyctlInt(unix.KEYCTL_SET_TIMEOUT, serial, int(KeyCacheTimeout.Seconds()), 0, 0); err != nil {
		return fail("set_timeout", err)
	}
	if _, err := unix.KeyctlInt(unix.KEYCTL_LINK, serial, unix.KEY_SPEC_USER_KEYRING, 0, 0); err != nil {
		return fail("link", err)
	}
	_, _ = unix.KeyctlInt(unix.KEYCTL_UNLINK, serial, unix.KEY_SPEC_PROCESS_KEYRING, 0, 0)
	forgetCachedKeys(scope, desc)
	return desc, nil
}

// forgetCachedKeys invalidates the cached seal keys of scope except the
// one described keep ("" for none).
func forgetCachedKeys(scope, keep string) {
	if scope == "" {
		return
	}
	for _, serial := range userKeyring() {
		d, err := unix.KeyctlString(unix.KEYCTL_DESCRIBE, serial)
		if err != nil {
			continue
		}
		// type;uid;gid;perm;description
		f := strings.SplitN(d, ";", 5)
		if len(f) != 5 || f[0] != keyCacheType || f[4] == keep ||
			!strings.HasPrefix(f[4], keyCachePrefix) || !strings.HasSuffix(f[4], ":"+scope) {
			continue
		}
		_, _ = unix.KeyctlInt(unix.KEYCTL_INVALIDATE, serial, 0, 0, 0)
	}
}

// userKeyring lists the serials of the keys linked in @u (none if it
// cannot be read).
func userKeyring() []int {
	buf := make([]byte, 1024)
	for {
		n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, unix.KEY_SPEC_USER_KEYRING, buf, 0)
		if err != nil {
			return nil
		}
		if n <= len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, n)
	}
	serials := make([]int, 0, len(buf)/4)
	for i := 0; i+4 <= len(buf); i += 4 {
		serials = append(serials, int(int32(binary.NativeEndian.Uint32(buf[i:]))))
	}
	return serials
}

var errNoKeyCacheScope = errors.New("no session bus: the seal key is not cached")
