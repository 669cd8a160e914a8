package keychain

// These tests use a real Secret Service. Run them with
//
//	AGENTNODE_REQUIRE_KEYRING=1 test/keyring.sh go test -race ./kernel/keychain/...
//
// Without a reachable keychain they skip, unless AGENTNODE_REQUIRE_KEYRING=1,
// in which case they fail.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/kernel/reason"
)

func requireKeyring(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("AGENTNODE_REQUIRE_KEYRING") == "1" {
			t.Fatalf("AGENTNODE_REQUIRE_KEYRING=1 but: %v", err)
		}
		t.Skipf("no OS keychain (run under test/keyring.sh): %v", err)
	}
}

func uniqueService(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "agentnode-test:" + t.Name() + ":" + hex.EncodeToString(b)
}

// secretTool runs libsecret's secret-tool, an independent Secret Service
// client, when it is installed.
func secretTool(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	if _, err := exec.LookPath("secret-tool"); err != nil {
		return "", false
	}
	out, err := exec.Command("secret-tool", args...).Output()
	if err != nil {
		return "", true
	}
	return string(out), true
}

func TestRoundTrip(t *testing.T) {
	requireKeyring(t)
	svc := uniqueService(t)
	t.Cleanup(func() { _ = Delete(svc, "token") })

	if _, err := Get(svc, "token"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get before Set: err = %v, want ErrNotFound", err)
	}
	if err := Set(svc, "token", "first secret"); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if got, err := Get(svc, "token"); err != nil || got != "first secret" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if got, ok := secretTool(t, "lookup", "service", svc, "username", "token"); ok && got != "first secret" {
		t.Fatalf("secret-tool sees %q, want the stored secret", got)
	}
	if _, err := Get(svc, "other-user"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get other user: err = %v, want ErrNotFound", err)
	}
	if err := Set(svc, "token", "second secret"); err != nil {
		t.Fatalf("Set again: %v", err)
	}
	if got, err := Get(svc, "token"); err != nil || got != "second secret" {
		t.Fatalf("Get after overwrite = %q, %v", got, err)
	}
	if err := Delete(svc, "token"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := Get(svc, "token"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Delete: err = %v, want ErrNotFound", err)
	}
	if got, ok := secretTool(t, "lookup", "service", svc, "username", "token"); ok && got != "" {
		t.Fatalf("secret-tool still sees %q after Delete", got)
	}
	err := Delete(svc, "token")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Delete: err = %v, want ErrNotFound", err)
	}
	if reason.CodeOf(err) != reason.CredentialsMissing {
		t.Fatalf("code = %q, want credentials_missing", reason.CodeOf(err))
	}
}

func TestReadsWhatAnotherClientStored(t *testing.T) {
	requireKeyring(t)
	if _, err := exec.LookPath("secret-tool"); err != nil {
		t.Skip("secret-tool not installed")
	}
	svc := uniqueService(t)
	t.Cleanup(func() { _ = Delete(svc, "token") })
	cmd := exec.Command("secret-tool", "store", "--label=agentnode test", "service", svc, "username", "token")
	cmd.Stdin = strings.NewReader("from secret-tool")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("secret-tool store: %v\n%s", err, out)
	}
	if got, err := Get(svc, "token"); err != nil || got != "from secret-tool" {
		t.Fatalf("Get = %q, %v", got, err)
	}
}

func TestRejectsEmpty(t *testing.T) {
	for name, f := range map[string]func() error{
		"empty service": func() error { return Set("", "u", "s") },
		"empty user":    func() error { _, err := Get("s", ""); return err },
		"empty secret":  func() error { return Set("s", "u", "") },
	} {
		if err := f(); err == nil || reason.CodeOf(err) != reason.CredentialsMissing {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// withoutKeychain points the process at a session bus address that does not
// exist and puts a fake dbus-launch first in PATH that records whether it
// ran.
func withoutKeychain(t *testing.T) (launched string) {
	t.Helper()
	dir := t.TempDir()
	launched = filepath.Join(dir, "launched")
	fake := "#!/bin/sh\ntouch " + launched + "\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "dbus-launch"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return launched
}

func checkUnavailable(t *testing.T, launched string) {
	t.Helper()
	for name, err := range map[string]error{
		"Available": Available(),
		"Set":       Set("agentnode-test:nobus", "u", "s"),
		"Get":       func() error { _, err := Get("agentnode-test:nobus", "u"); return err }(),
		"Delete":    Delete("agentnode-test:nobus", "u"),
	} {
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: err = %v, want ErrUnavailable", name, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "no OS keychain available (Secret Service not running): ") {
			t.Errorf("%s: message %q", name, err)
		}
		if reason.CodeOf(err) != reason.CredentialsMissing {
			t.Errorf("%s: code %q, want credentials_missing", name, reason.CodeOf(err))
		}
	}
	if _, err := os.Stat(launched); err == nil {
		t.Error("dbus-launch was run")
	}
}

func TestUnavailableNoBus(t *testing.T) {
	launched := withoutKeychain(t)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	if _, err := os.Stat(filepath.Join("/run/user", strconv.Itoa(os.Getuid()), "bus")); err == nil {
		t.Skip("this user has a systemd session bus at /run/user/<uid>/bus")
	}
	checkUnavailable(t, launched)
}

func TestUnavailableDeadBus(t *testing.T) {
	launched := withoutKeychain(t)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+filepath.Join(t.TempDir(), "no-such-socket"))
	checkUnavailable(t, launched)
}

// TestUnavailableBusWithoutSecretService starts a real, empty session bus
// (no services to activate) and expects Available to say so.
func TestUnavailableBusWithoutSecretService(t *testing.T) {
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		if os.Getenv("AGENTNODE_REQUIRE_KEYRING") == "1" {
			t.Fatal("dbus-daemon not installed")
		}
		t.Skip("dbus-daemon not installed")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "bus")
	conf := filepath.Join(dir, "session.conf")
	err = os.WriteFile(conf, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=`+sock+`</listen>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemon, "--config-file="+conf, "--nofork", "--nopidfile")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i == 100 {
			t.Fatal("dbus-daemon did not create its socket")
		}
		time.Sleep(50 * time.Millisecond)
	}
	launched := withoutKeychain(t)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+sock)
	checkUnavailable(t, launched)
}
