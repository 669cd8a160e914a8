package keychain

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// The bus's answer when the Secret Service dies with a call in flight is
// retried; other errors are not.
func TestServiceDiedClassifiesNoReply(t *testing.T) {
	died := dbus.Error{Name: noReply, Body: []any{"Message recipient disconnected from message bus without replying"}}
	for _, err := range []error{died, fmt.Errorf("get x: %w", died),
		errors.New("org.freedesktop.secrets on the session bus: Message recipient disconnected from message bus without replying")} {
		if !serviceDied(err) {
			t.Errorf("serviceDied(%v) = false", err)
		}
	}
	for _, err := range []error{nil, dbus.Error{Name: "org.freedesktop.DBus.Error.ServiceUnknown"},
		errors.New("the keyring is locked"), ErrNotFound} {
		if serviceDied(err) {
			t.Errorf("serviceDied(%v) = true", err)
		}
	}
}

// TestGetSurvivesTheServiceDyingMidCall stops the Secret Service, sends a
// Get to it, kills it with the call in flight and checks that the Get
// answers the stored secret from the service D-Bus activation starts
// again (test/keyring.sh's, which unlocks the keyring). It kills a
// daemon, so it runs only in keyring.sh's private session.
func TestGetSurvivesTheServiceDyingMidCall(t *testing.T) {
	requireKeyring(t)
	if os.Getenv("AGENTNODE_KEYRING_PRIVATE") != "1" {
		t.Skip("kills the Secret Service: only in test/keyring.sh's private session")
	}
	svc := uniqueService(t)
	if err := Set(svc, "token", "kept"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Delete(svc, "token") })
	addr, err := sessionBusAddress()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var pid uint32
	if err := conn.BusObject().Call("org.freedesktop.DBus.GetConnectionUnixProcessID", 0, secretsName).Store(&pid); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(int(pid), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	type got struct {
		s   string
		err error
	}
	done := make(chan got, 1)
	go func() {
		s, err := Get(svc, "token")
		done <- got{s, err}
	}()
	// Give the call time to reach the stopped daemon. If it has not yet,
	// it reaches the new one: the test still holds, it only proves less.
	time.Sleep(300 * time.Millisecond)
	if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.s != "kept" {
		t.Fatalf("Get after the service died: %q, %v", r.s, r.err)
	}
}
