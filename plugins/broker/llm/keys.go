package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	gokeyring "github.com/zalando/go-keyring"

	"github.com/agentnode/agentnode/sdk/broker"
	"github.com/agentnode/agentnode/sdk/broker/provider"
)

// keyTTL bounds how long a credential read from the keychain is reused. A
// keychain read costs a few milliseconds of D-Bus round trips; a broker
// process lives as long as one agentnode command, so `agentnode auth set`
// or `remove` reaches later commands at once and running ones within keyTTL.
// A credential the provider rejects is dropped at once.
const keyTTL = time.Minute

// errNoKey is what a key getter returns when nothing is stored.
var errNoKey = gokeyring.ErrNotFound

// keyGetter reads a secret from the OS keychain. It may block.
type keyGetter func(service, user string) (string, error)

// keychainGet reads from the Secret Service on the session bus, refusing
// up front when there is no session bus: go-keyring's bus library would
// otherwise try to launch a dbus-daemon of its own.
func keychainGet(service, user string) (string, error) {
	if err := sessionBus(); err != nil {
		return "", err
	}
	return gokeyring.Get(service, user)
}

// sessionBus checks that a D-Bus session bus can be found the way the bus
// library looks for one, short of auto-launching: DBUS_SESSION_BUS_ADDRESS,
// or the socket /run/user/<uid>/bus.
func sessionBus() error {
	if a := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); a != "" && a != "autolaunch:" {
		return nil
	}
	sock := filepath.Join("/run/user", fmt.Sprint(os.Getuid()), "bus")
	if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
		return nil
	}
	return errors.New("no OS keychain available: no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set and " + sock + " does not exist)")
}

// keyCache reads provider credentials through get and keeps them for keyTTL.
type keyCache struct {
	get keyGetter
	now func() time.Time

	mu      sync.Mutex
	entries map[string]cachedKey
}

type cachedKey struct {
	key     string
	expires time.Time
}

func newKeyCache(get keyGetter) *keyCache {
	return &keyCache{get: get, now: time.Now, entries: map[string]cachedKey{}}
}

// key returns the credential of provider name. Errors wrap
// broker.ErrCredentialsMissing (or ctx's error when the keychain does not
// answer in time) and never contain the credential.
func (c *keyCache) key(ctx context.Context, name string) (string, error) {
	c.mu.Lock()
	e, ok := c.entries[name]
	c.mu.Unlock()
	if ok && c.now().Before(e.expires) {
		return e.key, nil
	}
	type result struct {
		key string
		err error
	}
	done := make(chan result, 1)
	service := provider.KeychainService(name)
	go func() {
		k, err := c.get(service, provider.KeychainUser)
		done <- result{k, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		// The goroutine stays blocked on D-Bus; the plugin goes on.
		return "", fmt.Errorf("%w: provider %s: the OS keychain did not answer: %w", broker.ErrCredentialsMissing, name, ctx.Err())
	}
	switch {
	case errors.Is(r.err, errNoKey):
		return "", fmt.Errorf("%w: no token stored for provider %s (keychain service %s); run `agentnode auth set %s`",
			broker.ErrCredentialsMissing, name, service, name)
	case r.err != nil:
		return "", fmt.Errorf("%w: provider %s: OS keychain: %v", broker.ErrCredentialsMissing, name, r.err)
	case !provider.ValidSecret(r.key):
		return "", fmt.Errorf("%w: the token stored for provider %s (keychain service %s) is empty or not a valid header value; store it again with `agentnode auth set %s`",
			broker.ErrCredentialsMissing, name, service, name)
	}
	c.mu.Lock()
	c.entries[name] = cachedKey{key: r.key, expires: c.now().Add(keyTTL)}
	c.mu.Unlock()
	return r.key, nil
}

// forget drops provider name's cached credential.
func (c *keyCache) forget(name string) {
	c.mu.Lock()
	delete(c.entries, name)
	c.mu.Unlock()
}
