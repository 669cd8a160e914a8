// Package attestation implements agentnode's Ed25519-signed trust
// attestations: the document format, its canonical signing payload, signing,
// strict parsing, verification, and the evaluation a trust plugin performs
// (specs/attestation.md is the normative description).
//
// An attestation says "issuer vouches that version V of package P, whose
// installed artifact hashes to H, has trust level L between issued_at and
// expires_at". It is only worth something when it is signed by a key the user
// pinned in trust.keys under the issuer's id; Evaluate enforces that and
// returns the highest level among the attestations that pass every check, or
// "unknown" with a reason.
//
// The package imports only the standard library and sdk/trust, so third-party
// trust plugins can reuse it.
package attestation

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sync"
	"time"

	"github.com/agentnode/agentnode/sdk/trust"
)

// DomainPrefix is prepended to the canonical JSON object to form the signed
// payload, so an attestation signature can never be confused with a
// signature over anything else made with the same key.
const DomainPrefix = "agentnode-attestation-v1\n"

// TimeLayout is the only accepted form of issued_at and expires_at: RFC 3339
// in UTC with a literal "Z" and whole seconds.
const TimeLayout = "2006-01-02T15:04:05Z"

// DefaultValidity is the validity Sign uses when ExpiresAt is zero.
const DefaultValidity = 365 * 24 * time.Hour

// MaxClockSkew is how far in the future issued_at may lie at evaluation time.
const MaxClockSkew = 5 * time.Minute

// MaxSize is the largest attestation document Parse accepts.
const MaxSize = 64 << 10

// Errors returned (wrapped) by Parse, Sign and Verify.
var (
	// ErrMalformed: the document or a field is not well-formed.
	ErrMalformed = errors.New("malformed attestation")
	// ErrSignatureInvalid: the signature does not verify with the key.
	ErrSignatureInvalid = errors.New("attestation signature invalid")
)

// Field names, in the order a document is written.
const (
	FieldPackageID    = "package_id"
	FieldVersion      = "version"
	FieldArtifactHash = "artifact_hash"
	FieldTrustLevel   = "trust_level"
	FieldIssuer       = "issuer"
	FieldIssuedAt     = "issued_at"
	FieldExpiresAt    = "expires_at"
	FieldSignature    = "signature"
)

var fieldOrder = []string{
	FieldPackageID, FieldVersion, FieldArtifactHash, FieldTrustLevel,
	FieldIssuer, FieldIssuedAt, FieldExpiresAt, FieldSignature,
}

// Attestation is one attestation document. Times are kept in UTC with whole
// seconds; Signature is the standard base64 (with padding) of the 64-byte
// Ed25519 signature over Payload.
type Attestation struct {
	PackageID    string    `json:"package_id"`
	Version      string    `json:"version"`
	ArtifactHash string    `json:"artifact_hash"`
	TrustLevel   string    `json:"trust_level"`
	Issuer       string    `json:"issuer"`
	IssuedAt     time.Time `json:"issued_at"`
	ExpiresAt    time.Time `json:"expires_at"`
	Signature    string    `json:"signature"`
}

// patterns are the fields' syntax, compiled on first use: not every
// process that links this package checks an attestation (agentnode's run
// path does not; its trust plugin does), and compiling them (the
// repetitions {0,63} and {64} make large programs) cost ~1 ms and 160 KB
// of every such process's start.
var patterns = sync.OnceValue(func() *struct{ packageID, version, artifactHash, issuer, time *regexp.Regexp } {
	return &struct{ packageID, version, artifactHash, issuer, time *regexp.Regexp }{
		packageID: regexp.MustCompile(`^[a-z0-9-]{3,60}$`),
		// Semantic Versioning 2.0.0 (semver.org), no leading "v".
		version: regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
			`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
			`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`),
		artifactHash: regexp.MustCompile(`^sha256:[0-9a-f]{64}$`),
		issuer:       regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`),
		time:         regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$`),
	}
})

// AttestableLevels are the values trust_level may take ("unknown" is what
// the absence of a valid attestation means, so it cannot be attested).
var AttestableLevels = []string{trust.LevelUnverified, trust.LevelVerified, trust.LevelTrusted, trust.LevelCurated}

// ValidateLevel reports whether level may appear in trust_level.
func ValidateLevel(level string) error {
	for _, l := range AttestableLevels {
		if l == level {
			return nil
		}
	}
	return fmt.Errorf("%w: trust_level %q is not one of unverified, verified, trusted, curated", ErrMalformed, level)
}

// ValidateIssuer reports whether id is a valid issuer (signing key) id:
// 1–64 characters from [A-Za-z0-9._-], starting with a letter or digit (the
// key id pattern of trust.keys in config.json).
func ValidateIssuer(id string) error {
	if !patterns().issuer.MatchString(id) {
		return fmt.Errorf("%w: issuer %q must be 1-64 characters of [A-Za-z0-9._-] starting with a letter or digit", ErrMalformed, id)
	}
	return nil
}

// validate checks every field except the signature.
func (a *Attestation) validate() error {
	if !patterns().packageID.MatchString(a.PackageID) {
		return fmt.Errorf("%w: package_id %q must be 3-60 characters of [a-z0-9-]", ErrMalformed, a.PackageID)
	}
	if len(a.Version) > 128 || !patterns().version.MatchString(a.Version) {
		return fmt.Errorf("%w: version %q is not a semantic version", ErrMalformed, a.Version)
	}
	if !patterns().artifactHash.MatchString(a.ArtifactHash) {
		return fmt.Errorf("%w: artifact_hash %q must be \"sha256:\" and 64 lowercase hex digits", ErrMalformed, a.ArtifactHash)
	}
	if err := ValidateLevel(a.TrustLevel); err != nil {
		return err
	}
	if err := ValidateIssuer(a.Issuer); err != nil {
		return err
	}
	if err := checkTime(FieldIssuedAt, a.IssuedAt); err != nil {
		return err
	}
	if err := checkTime(FieldExpiresAt, a.ExpiresAt); err != nil {
		return err
	}
	if !a.ExpiresAt.After(a.IssuedAt) {
		return fmt.Errorf("%w: expires_at %s is not after issued_at %s", ErrMalformed, formatTime(a.ExpiresAt), formatTime(a.IssuedAt))
	}
	return nil
}

func checkTime(field string, t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("%w: %s is missing", ErrMalformed, field)
	}
	if t.Year() < 1 || t.Year() > 9999 {
		return fmt.Errorf("%w: %s year %d out of range", ErrMalformed, field, t.Year())
	}
	return nil
}

func formatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

func parseTime(field, s string) (time.Time, error) {
	if !patterns().time.MatchString(s) {
		return time.Time{}, fmt.Errorf("%w: %s %q must be RFC 3339 UTC with whole seconds (YYYY-MM-DDTHH:MM:SSZ)", ErrMalformed, field, s)
	}
	t, err := time.Parse(TimeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s %q: %w", ErrMalformed, field, s, err)
	}
	return t, nil
}

// Payload returns the exact bytes that are signed: DomainPrefix followed by
// the JSON object of every field except signature, keys in ascending byte
// order, no whitespace. Every value is restricted to printable ASCII that
// needs no JSON escaping, so this is also the RFC 8785 (JCS) form of that
// object.
func Payload(a Attestation) ([]byte, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(DomainPrefix)
	// Keys sorted: artifact_hash < expires_at < issued_at < issuer <
	// package_id < trust_level < version.
	fmt.Fprintf(&b, `{"artifact_hash":"%s","expires_at":"%s","issued_at":"%s","issuer":"%s","package_id":"%s","trust_level":"%s","version":"%s"}`,
		a.ArtifactHash, formatTime(a.ExpiresAt), formatTime(a.IssuedAt), a.Issuer, a.PackageID, a.TrustLevel, a.Version)
	return b.Bytes(), nil
}

// Sign returns a signed copy of a. IssuedAt defaults to the current time and
// ExpiresAt to IssuedAt+DefaultValidity; both are converted to UTC and
// truncated to whole seconds before signing. Any existing Signature is
// replaced.
func Sign(a Attestation, priv ed25519.PrivateKey) (Attestation, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return Attestation{}, fmt.Errorf("sign attestation: private key is %d bytes, want %d", len(priv), ed25519.PrivateKeySize)
	}
	if a.IssuedAt.IsZero() {
		a.IssuedAt = time.Now()
	}
	a.IssuedAt = a.IssuedAt.UTC().Truncate(time.Second)
	if a.ExpiresAt.IsZero() {
		a.ExpiresAt = a.IssuedAt.Add(DefaultValidity)
	}
	a.ExpiresAt = a.ExpiresAt.UTC().Truncate(time.Second)
	payload, err := Payload(a)
	if err != nil {
		return Attestation{}, fmt.Errorf("sign attestation: %w", err)
	}
	a.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(priv, payload))
	return a, nil
}

// Verify checks that a is well-formed and that its signature verifies with
// pub. It does not look at the time or at which package it is for; Evaluate
// does.
func Verify(a *Attestation, pub ed25519.PublicKey) error {
	if a == nil {
		return fmt.Errorf("%w: nil attestation", ErrMalformed)
	}
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("verify attestation: public key is %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	sig, err := decodeSignature(a.Signature)
	if err != nil {
		return err
	}
	payload, err := Payload(*a)
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, payload, sig) {
		return fmt.Errorf("%w (issuer %q)", ErrSignatureInvalid, a.Issuer)
	}
	return nil
}

func decodeSignature(s string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("%w: signature is missing", ErrMalformed)
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: signature is not standard base64: %w", ErrMalformed, err)
	}
	if len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("%w: signature is %d bytes, want %d", ErrMalformed, len(sig), ed25519.SignatureSize)
	}
	return sig, nil
}

// MarshalJSON writes the document with its fields in the order of
// specs/attestation.md. It fails for a document that Parse would reject.
func (a Attestation) MarshalJSON() ([]byte, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	if _, err := decodeSignature(a.Signature); err != nil {
		return nil, err
	}
	values := map[string]string{
		FieldPackageID: a.PackageID, FieldVersion: a.Version, FieldArtifactHash: a.ArtifactHash,
		FieldTrustLevel: a.TrustLevel, FieldIssuer: a.Issuer, FieldIssuedAt: formatTime(a.IssuedAt),
		FieldExpiresAt: formatTime(a.ExpiresAt), FieldSignature: a.Signature,
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range fieldOrder {
		if i > 0 {
			b.WriteByte(',')
		}
		// Every value is plain printable ASCII (validated above), so
		// quoting needs no escapes.
		fmt.Fprintf(&b, "%q:%q", k, values[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON parses data with the rules of Parse.
func (a *Attestation) UnmarshalJSON(data []byte) error {
	p, err := Parse(data)
	if err != nil {
		return err
	}
	*a = *p
	return nil
}

// Parse reads one attestation document. It is strict: the document must be
// a single JSON object whose members are exactly the eight fields, each a
// string, each once (key names are case-sensitive); unknown, missing or
// duplicate fields, trailing data and malformed values are errors wrapping
// ErrMalformed. Parse does not verify the signature.
func Parse(data []byte) (*Attestation, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%w: document is %d bytes, limit %d", ErrMalformed, len(data), MaxSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("%w: document is not a JSON object", ErrMalformed)
	}
	known := make(map[string]bool, len(fieldOrder))
	for _, f := range fieldOrder {
		known[f] = true
	}
	values := make(map[string]string, len(fieldOrder))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("%w: unexpected %v", ErrMalformed, tok)
		}
		if !known[key] {
			return nil, fmt.Errorf("%w: unknown field %q", ErrMalformed, key)
		}
		if _, dup := values[key]; dup {
			return nil, fmt.Errorf("%w: duplicate field %q", ErrMalformed, key)
		}
		tok, err = dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: field %q: %w", ErrMalformed, key, err)
		}
		s, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("%w: field %q must be a string", ErrMalformed, key)
		}
		values[key] = s
	}
	if tok, err = dec.Token(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '}' {
		return nil, fmt.Errorf("%w: unexpected %v", ErrMalformed, tok)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the object", ErrMalformed)
	}
	for _, f := range fieldOrder {
		if _, ok := values[f]; !ok {
			return nil, fmt.Errorf("%w: field %q is missing", ErrMalformed, f)
		}
	}
	a := &Attestation{
		PackageID:    values[FieldPackageID],
		Version:      values[FieldVersion],
		ArtifactHash: values[FieldArtifactHash],
		TrustLevel:   values[FieldTrustLevel],
		Issuer:       values[FieldIssuer],
		Signature:    values[FieldSignature],
	}
	if a.IssuedAt, err = parseTime(FieldIssuedAt, values[FieldIssuedAt]); err != nil {
		return nil, err
	}
	if a.ExpiresAt, err = parseTime(FieldExpiresAt, values[FieldExpiresAt]); err != nil {
		return nil, err
	}
	if err := a.validate(); err != nil {
		return nil, err
	}
	if _, err := decodeSignature(a.Signature); err != nil {
		return nil, err
	}
	return a, nil
}
