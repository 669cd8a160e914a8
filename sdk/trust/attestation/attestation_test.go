package attestation

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The test vector of specs/attestation.md. It was cross-checked with an
// independent Ed25519 implementation (Python cryptography).
const (
	vecSeedB64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	vecPubB64  = "A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg="
	vecPayload = "agentnode-attestation-v1\n" +
		`{"artifact_hash":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",` +
		`"expires_at":"2026-01-01T00:00:00Z","issued_at":"2025-01-01T00:00:00Z","issuer":"example-issuer",` +
		`"package_id":"hello-tools","trust_level":"verified","version":"1.2.3"}`
	vecSig = "oyhZdVMp37k561xfB31PjOt7ke/vyoupzPNFD9sb/wRTHQxHP/NFxbXHgvD8NKIrQ+hBFc/Jbjj1chpWwvssBg=="
	vecDoc = `{"package_id":"hello-tools","version":"1.2.3",` +
		`"artifact_hash":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",` +
		`"trust_level":"verified","issuer":"example-issuer","issued_at":"2025-01-01T00:00:00Z",` +
		`"expires_at":"2026-01-01T00:00:00Z",` +
		`"signature":"oyhZdVMp37k561xfB31PjOt7ke/vyoupzPNFD9sb/wRTHQxHP/NFxbXHgvD8NKIrQ+hBFc/Jbjj1chpWwvssBg=="}`
)

func vecKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	seed, err := base64.StdEncoding.DecodeString(vecSeedB64)
	if err != nil {
		t.Fatal(err)
	}
	return ed25519.NewKeyFromSeed(seed)
}

func vecUnsigned() Attestation {
	return Attestation{
		PackageID:    "hello-tools",
		Version:      "1.2.3",
		ArtifactHash: "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		TrustLevel:   "verified",
		Issuer:       "example-issuer",
		IssuedAt:     time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		ExpiresAt:    time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	}
}

func TestVector(t *testing.T) {
	priv := vecKey(t)
	if got := base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)); got != vecPubB64 {
		t.Fatalf("public key = %s, want %s", got, vecPubB64)
	}
	payload, err := Payload(vecUnsigned())
	if err != nil {
		t.Fatal(err)
	}
	if string(payload) != vecPayload {
		t.Fatalf("payload =\n%q\nwant\n%q", payload, vecPayload)
	}
	a, err := Sign(vecUnsigned(), priv)
	if err != nil {
		t.Fatal(err)
	}
	if a.Signature != vecSig {
		t.Fatalf("signature = %s, want %s", a.Signature, vecSig)
	}
	doc, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if string(doc) != vecDoc {
		t.Fatalf("document =\n%s\nwant\n%s", doc, vecDoc)
	}
	p, err := Parse([]byte(vecDoc))
	if err != nil {
		t.Fatal(err)
	}
	if *p != a {
		t.Fatalf("Parse = %+v, want %+v", *p, a)
	}
	if err := Verify(p, priv.Public().(ed25519.PublicKey)); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

// TestVectorInSpec keeps specs/attestation.md and the code in step.
func TestVectorInSpec(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join("..", "..", "..", "specs", "attestation.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{vecSeedB64, vecPubB64, vecSig, vecDoc, strings.TrimPrefix(vecPayload, DomainPrefix), `agentnode-attestation-v1\n`} {
		if !bytes.Contains(spec, []byte(s)) {
			t.Errorf("specs/attestation.md does not contain %q", s)
		}
	}
}

func TestSignDefaultsAndNormalises(t *testing.T) {
	priv := vecKey(t)
	a := vecUnsigned()
	a.IssuedAt = time.Time{}
	a.ExpiresAt = time.Time{}
	before := time.Now().UTC().Truncate(time.Second)
	s, err := Sign(a, priv)
	if err != nil {
		t.Fatal(err)
	}
	if s.IssuedAt.Before(before) || s.IssuedAt.After(time.Now()) {
		t.Errorf("IssuedAt = %v, want about now", s.IssuedAt)
	}
	if got := s.ExpiresAt.Sub(s.IssuedAt); got != DefaultValidity {
		t.Errorf("validity = %v, want %v", got, DefaultValidity)
	}

	loc := time.FixedZone("CET", 3600)
	a = vecUnsigned()
	a.IssuedAt = time.Date(2025, 1, 1, 1, 0, 0, 999_999_999, loc)
	a.ExpiresAt = time.Date(2026, 1, 1, 1, 0, 0, 5, loc)
	s, err = Sign(a, priv)
	if err != nil {
		t.Fatal(err)
	}
	if s.Signature != vecSig {
		t.Errorf("signature over normalised times = %s, want the vector's %s", s.Signature, vecSig)
	}
	if s.IssuedAt.Location() != time.UTC || s.IssuedAt.Nanosecond() != 0 {
		t.Errorf("IssuedAt not normalised: %v", s.IssuedAt)
	}
}

func TestSignRejects(t *testing.T) {
	priv := vecKey(t)
	cases := map[string]func(*Attestation){
		"package_id uppercase":  func(a *Attestation) { a.PackageID = "Hello" },
		"package_id too short":  func(a *Attestation) { a.PackageID = "ab" },
		"package_id empty":      func(a *Attestation) { a.PackageID = "" },
		"version not semver":    func(a *Attestation) { a.Version = "v1.2" },
		"version quote":         func(a *Attestation) { a.Version = `1.2.3"` },
		"hash not sha256":       func(a *Attestation) { a.ArtifactHash = "sha512:00" },
		"hash uppercase hex":    func(a *Attestation) { a.ArtifactHash = strings.ToUpper(a.ArtifactHash) },
		"level unknown":         func(a *Attestation) { a.TrustLevel = "unknown" },
		"level bogus":           func(a *Attestation) { a.TrustLevel = "super" },
		"issuer empty":          func(a *Attestation) { a.Issuer = "" },
		"issuer with quote":     func(a *Attestation) { a.Issuer = `a"b` },
		"issuer with space":     func(a *Attestation) { a.Issuer = "a b" },
		"issuer with colon":     func(a *Attestation) { a.Issuer = "a:b" },
		"issuer too long":       func(a *Attestation) { a.Issuer = strings.Repeat("a", 65) },
		"issuer leading dot":    func(a *Attestation) { a.Issuer = ".a" },
		"expires before issued": func(a *Attestation) { a.ExpiresAt = a.IssuedAt.Add(-time.Hour) },
		"expires equals issued": func(a *Attestation) { a.ExpiresAt = a.IssuedAt },
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			a := vecUnsigned()
			mut(&a)
			if _, err := Sign(a, priv); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Sign err = %v, want ErrMalformed", err)
			}
		})
	}
	if _, err := Sign(vecUnsigned(), priv[:10]); err == nil {
		t.Fatal("Sign with a short key succeeded")
	}
}

func TestParseStrict(t *testing.T) {
	var m map[string]any
	if err := json.Unmarshal([]byte(vecDoc), &m); err != nil {
		t.Fatal(err)
	}
	// with replaces one member's raw JSON text in vecDoc.
	with := func(field, raw string) string {
		var b strings.Builder
		b.WriteString("{")
		for i, f := range fieldOrder {
			if i > 0 {
				b.WriteString(",")
			}
			v, _ := json.Marshal(m[f])
			if f == field {
				v = []byte(raw)
			}
			b.WriteString(`"` + f + `":` + string(v))
		}
		b.WriteString("}")
		return b.String()
	}
	cases := map[string]string{
		"empty":                  ``,
		"not an object":          `[]`,
		"string":                 `"x"`,
		"unknown field":          strings.Replace(vecDoc, `{`, `{"comment":"x",`, 1),
		"duplicate field":        strings.Replace(vecDoc, `{`, `{"trust_level":"curated",`, 1),
		"duplicate same value":   strings.Replace(vecDoc, `{`, `{"trust_level":"verified",`, 1),
		"case-folded key":        strings.Replace(vecDoc, `"package_id"`, `"Package_ID"`, 1),
		"missing field":          strings.Replace(vecDoc, `"trust_level":"verified",`, ``, 1),
		"missing signature":      strings.Replace(vecDoc, `,"signature":"`+vecSig+`"`, ``, 1),
		"number value":           with(FieldVersion, `1`),
		"null value":             with(FieldIssuer, `null`),
		"object value":           with(FieldIssuer, `{}`),
		"trailing data":          vecDoc + `{}`,
		"trailing garbage":       vecDoc + ` x`,
		"two objects":            vecDoc + "\n" + vecDoc,
		"offset time":            with(FieldIssuedAt, `"2025-01-01T01:00:00+01:00"`),
		"fractional seconds":     with(FieldIssuedAt, `"2025-01-01T00:00:00.5Z"`),
		"lowercase z":            with(FieldIssuedAt, `"2025-01-01T00:00:00z"`),
		"date only":              with(FieldExpiresAt, `"2026-01-01"`),
		"invalid date":           with(FieldExpiresAt, `"2026-02-30T00:00:00Z"`),
		"empty expires_at":       with(FieldExpiresAt, `""`),
		"signature not base64":   with(FieldSignature, `"!!!"`),
		"signature short":        with(FieldSignature, `"`+base64.StdEncoding.EncodeToString(make([]byte, 63))+`"`),
		"signature unpadded":     with(FieldSignature, `"`+strings.TrimRight(vecSig, "=")+`"`),
		"signature url alphabet": with(FieldSignature, `"`+strings.NewReplacer("+", "-", "/", "_").Replace(vecSig)+`"`),
		"level unknown":          with(FieldTrustLevel, `"unknown"`),
		"too large":              with(FieldIssuer, `"`+strings.Repeat("a", MaxSize)+`"`),
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(doc)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse err = %v, want ErrMalformed", err)
			}
			var a Attestation
			if err := json.Unmarshal([]byte(doc), &a); err == nil {
				t.Fatal("json.Unmarshal accepted it")
			}
		})
	}
}

func TestParseAcceptsWhitespaceAndEscapes(t *testing.T) {
	var indented bytes.Buffer
	if err := json.Indent(&indented, []byte(vecDoc), "", "  "); err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(indented.String(), `"hello-tools"`, `"hello\u002dtools"`, 1) + "\n"
	a, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(a, vecKey(t).Public().(ed25519.PublicKey)); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

func TestVerify(t *testing.T) {
	priv := vecKey(t)
	pub := priv.Public().(ed25519.PublicKey)
	signed, err := Sign(vecUnsigned(), priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(&signed, pub); err != nil {
		t.Fatalf("Verify: %v", err)
	}

	otherPub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(&signed, otherPub); !errors.Is(err, ErrSignatureInvalid) {
		t.Errorf("other key: err = %v, want ErrSignatureInvalid", err)
	}

	tamper := map[string]func(*Attestation){
		"package_id":    func(a *Attestation) { a.PackageID = "hello-tool" },
		"version":       func(a *Attestation) { a.Version = "1.2.4" },
		"artifact_hash": func(a *Attestation) { a.ArtifactHash = "sha256:" + strings.Repeat("0", 64) },
		"trust_level":   func(a *Attestation) { a.TrustLevel = "curated" },
		"issuer":        func(a *Attestation) { a.Issuer = "example-issuer2" },
		"issued_at":     func(a *Attestation) { a.IssuedAt = a.IssuedAt.Add(time.Second) },
		"expires_at":    func(a *Attestation) { a.ExpiresAt = a.ExpiresAt.Add(24 * time.Hour) },
		"signature": func(a *Attestation) {
			sig, _ := base64.StdEncoding.DecodeString(a.Signature)
			sig[0] ^= 1
			a.Signature = base64.StdEncoding.EncodeToString(sig)
		},
	}
	for name, mut := range tamper {
		t.Run(name, func(t *testing.T) {
			a := signed
			mut(&a)
			if err := Verify(&a, pub); !errors.Is(err, ErrSignatureInvalid) {
				t.Fatalf("err = %v, want ErrSignatureInvalid", err)
			}
		})
	}

	if err := Verify(nil, pub); !errors.Is(err, ErrMalformed) {
		t.Errorf("nil: err = %v, want ErrMalformed", err)
	}
	if err := Verify(&signed, pub[:31]); err == nil {
		t.Error("Verify with a short key succeeded")
	}
	unsigned := vecUnsigned()
	if err := Verify(&unsigned, pub); !errors.Is(err, ErrMalformed) {
		t.Errorf("unsigned: err = %v, want ErrMalformed", err)
	}
}

func TestMarshalRefusesInvalid(t *testing.T) {
	if _, err := json.Marshal(vecUnsigned()); err == nil {
		t.Fatal("marshalled an unsigned attestation")
	}
}
