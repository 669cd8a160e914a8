package main

// The keygen/attest round trip uses a real OS keychain: run it with
//
//	AGENTNODE_REQUIRE_KEYRING=1 test/keyring.sh go test -run Trust ./cmd/agentnode/
//
// Without one it skips, unless AGENTNODE_REQUIRE_KEYRING=1.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/keychain"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/sdk/trust"
	"github.com/agentnode/agentnode/sdk/trust/attestation"
	"github.com/agentnode/agentnode/test/keychaintest"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := execute(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// trustHome makes a fresh AGENTNODE_HOME with a default config.
func trustHome(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AGENTNODE_HOME", dir)
	t.Setenv("AGENTNODE_CONFIG", "")
	if _, _, err := configedit.Setup(filepath.Join(dir, "config.json")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writePackage(t *testing.T, id, version string) string {
	t.Helper()
	dir := t.TempDir()
	manifest := "manifest_version: \"0.2\"\npackage_id: " + id + "\nversion: " + version +
		"\nname: Demo\npublisher: acme\nsummary: demo\nruntime: exec\n"
	if err := os.WriteFile(filepath.Join(dir, "agentnode.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tool.sh"), []byte("#!/bin/sh\necho '{\"ok\":true}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func requireTrustKeyring(t *testing.T) { keychaintest.Require(t) }

func TestTrustKeygenAttest(t *testing.T) {
	requireTrustKeyring(t)
	home := trustHome(t)
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	id := "test-" + hex.EncodeToString(b)
	t.Cleanup(func() { _ = keychain.Delete(trustKeyService(id), trustKeyUser) })

	code, out, errOut := runCLI(t, "trust", "keygen", "--id", id, "--json")
	if code != 0 {
		t.Fatalf("keygen exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	var res keygenResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("keygen output %q: %v", out, err)
	}
	if res.ID != id || res.KeychainService != "agentnode-trust:"+id || res.Config != filepath.Join(home, "config.json") {
		t.Fatalf("keygen result %+v", res)
	}
	priv, err := trustKey(id)
	if err != nil {
		t.Fatalf("private key not in the keychain: %v", err)
	}
	if got := base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)); got != res.PublicKey {
		t.Fatalf("printed public key %s, keychain key's public key %s", res.PublicKey, got)
	}
	seed := base64.StdEncoding.EncodeToString(priv.Seed())
	cfg, err := config.Load(res.Config)
	if err != nil {
		t.Fatal(err)
	}
	var keys []trust.Key
	for _, k := range cfg.Trust.Keys {
		keys = append(keys, trust.Key{ID: k.ID, PublicKey: k.PublicKey})
	}
	if len(keys) != 1 || keys[0].ID != id || keys[0].PublicKey != res.PublicKey {
		t.Fatalf("trust.keys = %+v", keys)
	}

	// The same id again: refused, nothing changes.
	code, out2, errOut2 := runCLI(t, "trust", "keygen", "--id", id)
	if code != reason.ExitUsage || !strings.Contains(errOut2, "already") {
		t.Fatalf("second keygen: exit %d, stderr %s", code, errOut2)
	}
	// The same id, pinned in a fresh config but only in the keychain: refused.
	trustHome(t)
	code, _, errOut3 := runCLI(t, "trust", "keygen", "--id", id)
	if code != reason.ExitUsage || !strings.Contains(errOut3, "already exists in the OS keychain") {
		t.Fatalf("keygen with the id in the keychain: exit %d, stderr %s", code, errOut3)
	}
	if again, err := trustKey(id); err != nil || !again.Equal(priv) {
		t.Fatalf("keychain key changed: %v", err)
	}

	pkg := writePackage(t, "demo-tools", "1.4.0")
	attestStart := time.Now()
	code, doc, errOut4 := runCLI(t, "trust", "attest", pkg, "--level", "trusted", "--key", id, "--expires", "90d", "--version", "1.4.0")
	attestEnd := time.Now()
	if code != 0 {
		t.Fatalf("attest exit %d, stderr %s", code, errOut4)
	}
	for _, s := range []string{out, errOut, out2, errOut2, errOut3, doc, errOut4} {
		if strings.Contains(s, seed) {
			t.Fatal("the private key was printed")
		}
	}
	a, err := attestation.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("attest output %q: %v", doc, err)
	}
	hash, err := store.ContentHash(pkg)
	if err != nil {
		t.Fatal(err)
	}
	if a.PackageID != "demo-tools" || a.Version != "1.4.0" || a.ArtifactHash != hash || a.TrustLevel != "trusted" || a.Issuer != id {
		t.Fatalf("attestation %+v (hash %s)", a, hash)
	}
	if got := a.ExpiresAt.Sub(a.IssuedAt); got != 90*24*time.Hour {
		t.Fatalf("validity %v", got)
	}
	// Issued during the attest command (to the second the format keeps).
	if a.IssuedAt.Before(attestStart.Truncate(time.Second)) || a.IssuedAt.After(attestEnd) {
		t.Fatalf("issued_at %v, not within the attest command (%v to %v)", a.IssuedAt, attestStart, attestEnd)
	}
	resp := attestation.Evaluate(&trust.EvaluateRequest{
		PackageID: "demo-tools", Version: "1.4.0", ArtifactHash: hash,
		Attestations: [][]byte{[]byte(doc)}, Keys: keys, NowUnix: time.Now().Unix(),
	})
	if resp.Level != "trusted" || resp.Issuer != id {
		t.Fatalf("evaluation of the printed attestation: %+v", resp)
	}

	// A changed package no longer matches the attestation.
	if err := os.WriteFile(filepath.Join(pkg, "tool.sh"), []byte("#!/bin/sh\necho pwned\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	hash2, err := store.ContentHash(pkg)
	if err != nil {
		t.Fatal(err)
	}
	resp = attestation.Evaluate(&trust.EvaluateRequest{
		PackageID: "demo-tools", Version: "1.4.0", ArtifactHash: hash2,
		Attestations: [][]byte{[]byte(doc)}, Keys: keys, NowUnix: time.Now().Unix(),
	})
	if resp.Level != "unknown" {
		t.Fatalf("changed package still %+v", resp)
	}

	// A key that is not in the keychain.
	code, out, _ = runCLI(t, "trust", "attest", pkg, "--level", "verified", "--key", id+"-missing", "--json")
	if code != reason.ExitUsage || !strings.Contains(out, `"code":"credentials_missing"`) || !strings.Contains(out, "trust keygen") {
		t.Fatalf("missing key: exit %d, stdout %s", code, out)
	}
	// --version that does not match.
	code, _, errOut = runCLI(t, "trust", "attest", pkg, "--level", "verified", "--key", id, "--version", "9.9.9")
	if code != reason.ExitUsage || !strings.Contains(errOut, "does not match") {
		t.Fatalf("version mismatch: exit %d, stderr %s", code, errOut)
	}
}

// TestTrustWithoutKeychain points the CLI at a session bus that does not
// exist: both commands refuse with credentials_missing and exit 2.
func TestTrustWithoutKeychain(t *testing.T) {
	trustHome(t)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+filepath.Join(t.TempDir(), "no-bus"))
	pkg := writePackage(t, "demo-tools", "1.0.0")
	for name, args := range map[string][]string{
		"keygen": {"trust", "keygen", "--id", "nokeychain", "--json"},
		"attest": {"trust", "attest", pkg, "--level", "verified", "--key", "nokeychain", "--json"},
	} {
		code, out, _ := runCLI(t, args...)
		var r refusal
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%s: stdout %q: %v", name, out, err)
		}
		if code != reason.ExitUsage || r.Code != "credentials_missing" || !strings.Contains(r.Reason, "no OS keychain available (Secret Service not running)") {
			t.Errorf("%s: exit %d, %+v", name, code, r)
		}
	}
	cfg, err := config.Load(filepath.Join(os.Getenv("AGENTNODE_HOME"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Trust.Keys) != 0 {
		t.Fatalf("keygen without a keychain pinned %+v", cfg.Trust.Keys)
	}
	code, _, errOut := runCLI(t, "trust", "attest", pkg, "--level", "verified", "--key", "nokeychain")
	if code != reason.ExitUsage || !strings.Contains(errOut, "[credentials_missing]") {
		t.Errorf("text mode: exit %d, stderr %s", code, errOut)
	}
}

func TestTrustUsageErrors(t *testing.T) {
	trustHome(t)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+filepath.Join(t.TempDir(), "no-bus"))
	pkg := writePackage(t, "demo-tools", "1.0.0")
	noManifest := t.TempDir()
	cases := map[string][]string{
		"keygen without id":  {"trust", "keygen"},
		"keygen bad id":      {"trust", "keygen", "--id", "a b"},
		"attest no path":     {"trust", "attest", "--level", "verified", "--key", "k"},
		"attest no level":    {"trust", "attest", pkg, "--key", "k"},
		"attest bad level":   {"trust", "attest", pkg, "--level", "unknown", "--key", "k"},
		"attest bad key id":  {"trust", "attest", pkg, "--level", "verified", "--key", "../k"},
		"attest bad expires": {"trust", "attest", pkg, "--level", "verified", "--key", "k", "--expires", "-1d"},
		"attest no manifest": {"trust", "attest", noManifest, "--level", "verified", "--key", "k"},
		"attest not a dir":   {"trust", "attest", filepath.Join(pkg, "agentnode.yaml"), "--level", "verified", "--key", "k"},
	}
	for name, args := range cases {
		if code, _, errOut := runCLI(t, args...); code != reason.ExitUsage {
			t.Errorf("%s: exit %d, stderr %s", name, code, errOut)
		}
	}
}

func TestParseValidity(t *testing.T) {
	good := map[string]time.Duration{
		"90d": 90 * 24 * time.Hour, "1d": 24 * time.Hour, "720h": 720 * time.Hour,
		"1h30m": 90 * time.Minute, "36500d": 36500 * 24 * time.Hour,
	}
	for s, want := range good {
		if got, err := parseValidity(s); err != nil || got != want {
			t.Errorf("parseValidity(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0d", "-1d", "1.5d", "d", "90", "0s", "-5h", "36501d", "999999999999d", "1y"} {
		if _, err := parseValidity(s); err == nil {
			t.Errorf("parseValidity(%q) accepted", s)
		}
	}
}
