package attestation

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/trust"
)

var evalNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func signedDoc(t *testing.T, priv ed25519.PrivateKey, mut func(*Attestation)) []byte {
	t.Helper()
	a := vecUnsigned()
	if mut != nil {
		mut(&a)
	}
	s, err := Sign(a, priv)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func evalReq(docs ...[]byte) *trust.EvaluateRequest {
	return &trust.EvaluateRequest{
		PackageID:    "hello-tools",
		Version:      "1.2.3",
		ArtifactHash: "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		Attestations: docs,
		Keys:         []trust.Key{{ID: "example-issuer", PublicKey: vecPubB64}},
		NowUnix:      evalNow.Unix(),
	}
}

func TestEvaluateEdges(t *testing.T) {
	priv := vecKey(t)
	cases := []struct {
		name   string
		req    func() *trust.EvaluateRequest
		level  string
		reason string
	}{
		{"nil request", func() *trust.EvaluateRequest { return nil }, "unknown", ReasonNoAttestation},
		{"no attestation", func() *trust.EvaluateRequest { return evalReq() }, "unknown", ReasonNoAttestation},
		{"valid", func() *trust.EvaluateRequest { return evalReq(signedDoc(t, priv, nil)) }, "verified", "attested verified by example-issuer"},
		{"malformed", func() *trust.EvaluateRequest { return evalReq([]byte(`{"x":1}`)) }, "unknown", ReasonMalformed},
		{"pinned key not base64", func() *trust.EvaluateRequest {
			r := evalReq(signedDoc(t, priv, nil))
			r.Keys[0].PublicKey = "%%%"
			return r
		}, "unknown", ReasonPinnedKeyInvalid},
		{"pinned key wrong size", func() *trust.EvaluateRequest {
			r := evalReq(signedDoc(t, priv, nil))
			r.Keys[0].PublicKey = base64.StdEncoding.EncodeToString(make([]byte, 31))
			return r
		}, "unknown", ReasonPinnedKeyInvalid},
		{"second pinned key with the same id verifies", func() *trust.EvaluateRequest {
			other, _, _ := ed25519.GenerateKey(nil)
			r := evalReq(signedDoc(t, priv, nil))
			r.Keys = append([]trust.Key{{ID: "example-issuer", PublicKey: base64.StdEncoding.EncodeToString(other)}}, r.Keys...)
			return r
		}, "verified", "attested"},
		{"expires exactly now", func() *trust.EvaluateRequest {
			return evalReq(signedDoc(t, priv, func(a *Attestation) { a.ExpiresAt = evalNow }))
		}, "unknown", ReasonExpired},
		{"expires one second after now", func() *trust.EvaluateRequest {
			return evalReq(signedDoc(t, priv, func(a *Attestation) { a.ExpiresAt = evalNow.Add(time.Second) }))
		}, "verified", "attested"},
		{"issued within the skew", func() *trust.EvaluateRequest {
			return evalReq(signedDoc(t, priv, func(a *Attestation) { a.IssuedAt = evalNow.Add(MaxClockSkew) }))
		}, "verified", "attested"},
		{"issued beyond the skew", func() *trust.EvaluateRequest {
			return evalReq(signedDoc(t, priv, func(a *Attestation) { a.IssuedAt = evalNow.Add(MaxClockSkew + time.Second) }))
		}, "unknown", ReasonNotYetValid},
		{"furthest failure is reported", func() *trust.EvaluateRequest {
			return evalReq([]byte(`{}`),
				signedDoc(t, priv, func(a *Attestation) { a.ArtifactHash = "sha256:" + strings.Repeat("1", 64) }),
				signedDoc(t, priv, func(a *Attestation) { a.Issuer = "stranger" }))
		}, "unknown", ReasonArtifactDiffers + ": attestation 2 of 3"},
		{"zero now means the current time", func() *trust.EvaluateRequest {
			now := time.Now()
			r := evalReq(signedDoc(t, priv, func(a *Attestation) { a.IssuedAt, a.ExpiresAt = now.Add(-time.Hour), now.Add(time.Hour) }))
			r.NowUnix = 0
			return r
		}, "verified", "attested"},
		{"zero now: future stays future", func() *trust.EvaluateRequest {
			now := time.Now()
			r := evalReq(signedDoc(t, priv, func(a *Attestation) { a.IssuedAt, a.ExpiresAt = now.Add(time.Hour), now.Add(2*time.Hour) }))
			r.NowUnix = 0
			return r
		}, "unknown", ReasonNotYetValid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := Evaluator{}.Evaluate(context.Background(), c.req())
			if err != nil {
				t.Fatal(err)
			}
			if resp.Level != c.level || !strings.HasPrefix(resp.Reason, c.reason) {
				t.Fatalf("got level %q reason %q, want %q / prefix %q", resp.Level, resp.Reason, c.level, c.reason)
			}
			if resp.Level == "unknown" && (resp.Issuer != "" || resp.ExpiresAtUnix != 0) {
				t.Fatalf("unknown response carries issuer/expiry: %+v", resp)
			}
		})
	}
}

func TestEvaluateReasonBounded(t *testing.T) {
	doc := `{"package_id":"` + strings.Repeat("x", 10000) + `"}`
	resp := Evaluate(evalReq([]byte(doc)))
	if resp.Level != "unknown" || len(resp.Reason) > maxReason+3 {
		t.Fatalf("level %q, reason length %d", resp.Level, len(resp.Reason))
	}
}

func TestEvaluatorHonoursCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (Evaluator{}).Evaluate(ctx, evalReq()); err == nil {
		t.Fatal("cancelled context: no error")
	}
}
