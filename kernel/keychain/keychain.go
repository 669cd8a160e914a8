// Package keychain stores agentnode's secrets (trust signing keys, provider
// tokens, the lockfile seal key) in the OS keychain through
// github.com/zalando/go-keyring; on Linux that is the freedesktop Secret
// Service (gnome-keyring, KeePassXC, ...) on the D-Bus session bus.
//
// There is no fallback: when no keychain is reachable every call fails with
// an error wrapping ErrUnavailable, and nothing is ever written to a file.
// All errors carry the reason code credentials_missing.
//
// Before touching go-keyring the package checks that a session bus exists
// and that the Secret Service answers on it, with a deadline. That keeps
// godbus from auto-launching a stray dbus-daemon (dbus-launch) when there is
// no session, and turns "nothing there" into a clear error instead of a hang.
//
// It is in the trusted core because the keys that seal the audit anchor and the
// lockfile are read through it.
package keychain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	dbus "github.com/godbus/dbus/v5"
	gokeyring "github.com/zalando/go-keyring"

	"github.com/agentnode/agentnode/kernel/reason"
)

var (
	// ErrNotFound means the keychain holds no secret for service and user.
	ErrNotFound = errors.New("secret not found in the OS keychain")
	// ErrUnavailable means no OS keychain could be reached.
	ErrUnavailable = errors.New("no OS keychain available (Secret Service not running)")
)

// Timeouts. probeTimeout bounds Available; opTimeout bounds one Set, Get or
// Delete, which may wait for the user to unlock a locked keyring.
var (
	probeTimeout = 5 * time.Second
	opTimeout    = 2 * time.Minute
)

const (
	secretsName    = "org.freedesktop.secrets"
	secretsPath    = dbus.ObjectPath("/org/freedesktop/secrets")
	secretsService = "org.freedesktop.Secret.Service"
	secretsSession = "org.freedesktop.Secret.Session"
)

func unavailable(cause error) error {
	return reason.Wrap(reason.CredentialsMissing, fmt.Errorf("%w: %w", ErrUnavailable, cause), "")
}

// sessionBusAddress finds the session bus the way godbus does, minus its
// last resort of running dbus-launch.
func sessionBusAddress() (string, error) {
	if a := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); a != "" && a != "autolaunch:" {
		return a, nil
	}
	sock := filepath.Join("/run/user", fmt.Sprint(os.Getuid()), "bus")
	if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
		return "unix:path=" + dbus.EscapeBusAddressValue(sock), nil
	}
	return "", errors.New("no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set and " + sock + " does not exist)")
}

// SessionBus is the address of the D-Bus session bus the keychain is
// reached through, found as Available finds it (without connecting): what
// identifies this keychain to a cache of its secrets (kernel/lockfile's seal key
// cache). An error means there is no session bus.
func SessionBus() (string, error) { return sessionBusAddress() }

// Available reports whether the OS keychain can be used: a D-Bus session bus
// exists and the Secret Service on it opens a session within a few seconds
// (starting it by D-Bus activation if it is installed but not running).
// It does not unlock anything and reads no secret.
func Available() error {
	err := probe()
	if serviceDied(err) {
		err = probe()
	}
	return err
}

// serviceDied reports whether err says the Secret Service went away while
// a call was in flight (the bus answers org.freedesktop.DBus.Error.NoReply,
// "disconnected from message bus without replying"): a daemon that crashed
// or was replaced. Such a call is made once more, and D-Bus activation
// starts the service again; no other error is retried, and a second
// failure stands (fail closed). Every call here is idempotent: Set
// replaces, Get and the probe read, and a Delete that took effect before
// the service died answers ErrNotFound the second time.
func serviceDied(err error) bool {
	if err == nil {
		return false
	}
	var de dbus.Error
	if errors.As(err, &de) && de.Name == noReply {
		return true
	}
	return strings.Contains(err.Error(), "disconnected from message bus without replying")
}

const noReply = "org.freedesktop.DBus.Error.NoReply"

// probe is one attempt of Available.
func probe() error {
	addr, err := sessionBusAddress()
	if err != nil {
		return unavailable(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	conn, err := dbus.Connect(addr, dbus.WithContext(ctx))
	if err != nil {
		return unavailable(fmt.Errorf("connect to the session bus %s: %w", addr, err))
	}
	defer conn.Close()
	var ignored dbus.Variant
	var session dbus.ObjectPath
	err = conn.Object(secretsName, secretsPath).
		CallWithContext(ctx, secretsService+".OpenSession", 0, "plain", dbus.MakeVariant("")).
		Store(&ignored, &session)
	if err != nil {
		return unavailable(fmt.Errorf("%s on the session bus: %w", secretsName, err))
	}
	_ = conn.Object(secretsName, session).CallWithContext(ctx, secretsSession+".Close", 0).Err
	return nil
}

// do runs op against go-keyring after Available succeeded, bounded by
// opTimeout, and maps go-keyring's errors.
func do(what, service, user string, op func() error) error {
	if service == "" || user == "" {
		return reason.New(reason.CredentialsMissing, "OS keychain: %s: empty service or user", what)
	}
	if err := Available(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		err := op()
		if serviceDied(err) {
			err = op()
		}
		done <- err
	}()
	timer := time.NewTimer(opTimeout)
	defer timer.Stop()
	var err error
	select {
	case err = <-done:
	case <-timer.C:
		// The goroutine stays blocked on D-Bus; the process goes on.
		return unavailable(fmt.Errorf("%s %s: no answer within %v (is the keyring locked?)", what, service, opTimeout))
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gokeyring.ErrNotFound):
		return reason.Wrap(reason.CredentialsMissing, fmt.Errorf("%w: service %q, user %q", ErrNotFound, service, user), "")
	case strings.Contains(err.Error(), "unlock"):
		return reason.Wrap(reason.CredentialsMissing, fmt.Errorf("OS keychain: %s %s: the keyring is locked and was not unlocked: %w", what, service, err), "")
	default:
		return reason.Wrap(reason.CredentialsMissing, fmt.Errorf("OS keychain: %s %s: %w", what, service, err), "")
	}
}

// Set stores secret under service and user, replacing an existing one.
func Set(service, user, secret string) error {
	if secret == "" {
		return reason.New(reason.CredentialsMissing, "OS keychain: set %s: empty secret", service)
	}
	return do("set", service, user, func() error { return gokeyring.Set(service, user, secret) })
}

// Get returns the secret stored under service and user, or an error
// wrapping ErrNotFound.
func Get(service, user string) (string, error) {
	var secret string
	err := do("get", service, user, func() error {
		s, err := gokeyring.Get(service, user)
		secret = s
		return err
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// Delete removes the secret stored under service and user, or returns an
// error wrapping ErrNotFound.
func Delete(service, user string) error {
	return do("delete", service, user, func() error { return gokeyring.Delete(service, user) })
}
