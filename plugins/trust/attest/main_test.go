package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/trust"
	"github.com/agentnode/agentnode/sdk/trust/attestation"
	"github.com/agentnode/agentnode/sdk/trust/trusttest"
)

var (
	now       = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	hashA     = "sha256:" + strings.Repeat("a1", 32)
	hashOther = "sha256:" + strings.Repeat("b2", 32)
)

type issuer struct {
	id   string
	priv ed25519.PrivateKey
	key  trust.Key
}

func newIssuer(t *testing.T, id string) issuer {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return issuer{id: id, priv: priv, key: trust.Key{ID: id, PublicKey: base64.StdEncoding.EncodeToString(pub)}}
}

// attest signs an attestation for weather-tools@1.0.0 / hashA at level,
// issued an hour before now and valid for 30 days, after mut.
func (is issuer) attest(t *testing.T, level string, mut func(*attestation.Attestation)) []byte {
	t.Helper()
	a := attestation.Attestation{
		PackageID: "weather-tools", Version: "1.0.0", ArtifactHash: hashA, TrustLevel: level,
		Issuer: is.id, IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(30 * 24 * time.Hour),
	}
	if mut != nil {
		mut(&a)
	}
	s, err := attestation.Sign(a, is.priv)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func request(keys []trust.Key, docs ...[]byte) *trust.EvaluateRequest {
	return &trust.EvaluateRequest{
		PackageID: "weather-tools", Version: "1.0.0", ArtifactHash: hashA, Publisher: "acme",
		Attestations: docs, Keys: keys, NowUnix: now.Unix(),
	}
}

// tamper rewrites one field of a signed document without re-signing.
func tamper(t *testing.T, doc []byte, field, value string) []byte {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m[field]; !ok {
		t.Fatalf("no field %q", field)
	}
	m[field] = value
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPluginOverGRPC(t *testing.T) {
	client := trusttest.Connect(t, info(), attestation.Evaluator{})
	ctx := context.Background()

	got, err := client.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "attest" || got.Kind != "trust" || got.Version != version || len(got.APIVersions) == 0 {
		t.Fatalf("Info = %+v", got)
	}

	alice := newIssuer(t, "alice")
	bob := newIssuer(t, "bob")
	mallory := newIssuer(t, "mallory")
	// mallory's key claims to be alice's.
	impostor := issuer{id: "alice", priv: mallory.priv}
	pinned := []trust.Key{alice.key, bob.key}

	validDoc := alice.attest(t, "trusted", nil)

	cases := []struct {
		name    string
		req     *trust.EvaluateRequest
		level   string
		reason  string // prefix
		issuer  string
		expires int64
	}{
		{"valid", request(pinned, validDoc), "trusted", "attested trusted by alice", "alice", now.Add(30 * 24 * time.Hour).Unix()},
		{"no attestation", request(pinned), "unknown", attestation.ReasonNoAttestation, "", 0},
		{"no pinned keys", request(nil, validDoc), "unknown", attestation.ReasonKeyNotPinned, "", 0},
		{"wrong key", request(pinned, impostor.attest(t, "curated", nil)), "unknown", attestation.ReasonSignatureInvalid, "", 0},
		{"unpinned issuer", request(pinned, mallory.attest(t, "curated", nil)), "unknown", attestation.ReasonKeyNotPinned, "", 0},
		{"expired", request(pinned, alice.attest(t, "trusted", func(a *attestation.Attestation) {
			a.IssuedAt, a.ExpiresAt = now.Add(-48*time.Hour), now.Add(-time.Second)
		})), "unknown", attestation.ReasonExpired, "", 0},
		{"future-issued", request(pinned, alice.attest(t, "trusted", func(a *attestation.Attestation) {
			a.IssuedAt = now.Add(time.Hour)
		})), "unknown", attestation.ReasonNotYetValid, "", 0},
		{"another artifact", request(pinned, alice.attest(t, "trusted", func(a *attestation.Attestation) {
			a.ArtifactHash = hashOther
		})), "unknown", attestation.ReasonArtifactDiffers, "", 0},
		{"other version", request(pinned, alice.attest(t, "trusted", func(a *attestation.Attestation) {
			a.Version = "1.0.1"
		})), "unknown", attestation.ReasonOtherPackage, "", 0},
		{"other package", request(pinned, alice.attest(t, "trusted", func(a *attestation.Attestation) {
			a.PackageID = "weather-tool"
		})), "unknown", attestation.ReasonOtherPackage, "", 0},
		{"tampered trust_level", request(pinned, tamper(t, validDoc, "trust_level", "curated")), "unknown", attestation.ReasonSignatureInvalid, "", 0},
		{"tampered expires_at", request(pinned, tamper(t, validDoc, "expires_at", "2099-01-01T00:00:00Z")), "unknown", attestation.ReasonSignatureInvalid, "", 0},
		{"tampered artifact_hash", request(pinned, tamper(t, alice.attest(t, "trusted", func(a *attestation.Attestation) {
			a.ArtifactHash = hashOther
		}), "artifact_hash", hashA)), "unknown", attestation.ReasonSignatureInvalid, "", 0},
		{"issuer renamed to another pinned key", request(pinned, tamper(t, validDoc, "issuer", "bob")), "unknown", attestation.ReasonSignatureInvalid, "", 0},
		{"garbage", request(pinned, []byte("not json")), "unknown", attestation.ReasonMalformed, "", 0},
		{"multiple: highest valid wins", request(pinned,
			alice.attest(t, "verified", nil),
			bob.attest(t, "curated", nil),
			alice.attest(t, "unverified", nil),
		), "curated", "attested curated by bob", "bob", now.Add(30 * 24 * time.Hour).Unix()},
		{"multiple: invalid higher ones are ignored", request(pinned,
			alice.attest(t, "verified", nil),
			mallory.attest(t, "curated", nil),
			tamper(t, bob.attest(t, "verified", nil), "trust_level", "curated"),
			bob.attest(t, "curated", func(a *attestation.Attestation) { a.ExpiresAt = now }),
			alice.attest(t, "trusted", func(a *attestation.Attestation) { a.ArtifactHash = hashOther }),
			[]byte(`{}`),
		), "verified", "attested verified by alice", "alice", now.Add(30 * 24 * time.Hour).Unix()},
		{"multiple: tie goes to the later expiry", request(pinned,
			alice.attest(t, "trusted", nil),
			bob.attest(t, "trusted", func(a *attestation.Attestation) { a.ExpiresAt = now.Add(60 * 24 * time.Hour) }),
		), "trusted", "attested trusted by bob", "bob", now.Add(60 * 24 * time.Hour).Unix()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := client.Evaluate(ctx, c.req)
			if err != nil {
				t.Fatalf("Evaluate: %v", err)
			}
			if resp.Level != c.level || !strings.HasPrefix(resp.Reason, c.reason) ||
				resp.Issuer != c.issuer || resp.ExpiresAtUnix != c.expires {
				t.Fatalf("got %+v\nwant level %q, reason prefix %q, issuer %q, expires %d",
					resp, c.level, c.reason, c.issuer, c.expires)
			}
		})
	}
}

// TestBinary builds the plugin and talks to it as the host does: a child
// process, the go-plugin handshake, gRPC only.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "agentnode-trust-attest")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	c := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  plugin.Handshake,
		VersionedPlugins: plugin.VersionedSet(plugin.KindTrust, &trust.GRPCPlugin{}),
		Cmd:              exec.Command(bin),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
	})
	defer c.Kill()
	rpc, err := c.Client()
	if err != nil {
		t.Fatalf("start plugin: %v", err)
	}
	raw, err := rpc.Dispense(plugin.KindTrust)
	if err != nil {
		t.Fatal(err)
	}
	client := raw.(*trust.Client)
	alice := newIssuer(t, "alice")
	resp, err := client.Evaluate(context.Background(), request([]trust.Key{alice.key}, alice.attest(t, "curated", nil)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Level != "curated" || resp.Issuer != "alice" {
		t.Fatalf("got %+v", resp)
	}
	resp, err = client.Evaluate(context.Background(), request(nil, alice.attest(t, "curated", nil)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Level != "unknown" {
		t.Fatalf("unpinned: got %+v", resp)
	}
}
