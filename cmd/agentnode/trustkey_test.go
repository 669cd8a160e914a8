package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/keychain"
	"github.com/agentnode/agentnode/kernel/reason"
)

func TestTrustKey(t *testing.T) {
	requireTrustKeyring(t)
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	id := "test-" + hex.EncodeToString(b)
	t.Cleanup(func() { _ = keychain.Delete(trustKeyService(id), trustKeyUser) })
	if got := trustKeyService("k1"); got != "agentnode-trust:k1" {
		t.Fatalf("trustKeyService = %q", got)
	}

	if _, err := trustKey(id); !errors.Is(err, keychain.ErrNotFound) {
		t.Fatalf("TrustKey before setTrustKey: err = %v, want ErrNotFound", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := setTrustKey(id, priv); err != nil {
		t.Fatalf("setTrustKey: %v", err)
	}
	raw, err := keychain.Get(trustKeyService(id), trustKeyUser)
	if err != nil {
		t.Fatal(err)
	}
	if raw != base64.StdEncoding.EncodeToString(priv.Seed()) {
		t.Fatal("stored secret is not the base64 seed")
	}
	got, err := trustKey(id)
	if err != nil {
		t.Fatalf("TrustKey: %v", err)
	}
	if !got.Equal(priv) {
		t.Fatal("TrustKey returned another key")
	}

	const junk = "c2VjcmV0LWJ1dC1ub3QtYS1zZWVk" // base64, wrong length
	if err := keychain.Set(trustKeyService(id), trustKeyUser, junk); err != nil {
		t.Fatal(err)
	}
	_, err = trustKey(id)
	if err == nil || strings.Contains(err.Error(), junk) || reason.CodeOf(err) != reason.CredentialsMissing {
		t.Fatalf("corrupt key: err = %v", err)
	}
	if err := setTrustKey(id, priv[:5]); err == nil {
		t.Fatal("setTrustKey accepted a short key")
	}
}
