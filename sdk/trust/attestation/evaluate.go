package attestation

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentnode/agentnode/sdk/trust"
)

// Reasons Evaluate gives for "unknown". The Reason of a response starts with
// one of them, followed by ": " and details.
const (
	ReasonNoAttestation    = "no attestation"
	ReasonMalformed        = "malformed attestation"
	ReasonKeyNotPinned     = "issuer key not pinned"
	ReasonPinnedKeyInvalid = "pinned key invalid"
	ReasonSignatureInvalid = "signature invalid"
	ReasonOtherPackage     = "other package or version"
	ReasonArtifactDiffers  = "artifact hash differs"
	ReasonNotYetValid      = "issued in the future"
	ReasonExpired          = "expired"
)

// progress orders the reasons by how far an attestation got through the
// checks; when every attestation fails, the reason of the one that got
// furthest is reported.
var progress = map[string]int{
	ReasonMalformed:        1,
	ReasonKeyNotPinned:     2,
	ReasonPinnedKeyInvalid: 2,
	ReasonSignatureInvalid: 3,
	ReasonOtherPackage:     4,
	ReasonArtifactDiffers:  5,
	ReasonNotYetValid:      6,
	ReasonExpired:          6,
}

// Evaluator is a trust.Evaluator backed by Evaluate. It never returns an
// error: every problem yields level "unknown" with a reason.
type Evaluator struct{}

// Evaluate implements trust.Evaluator.
func (Evaluator) Evaluate(ctx context.Context, req *trust.EvaluateRequest) (*trust.EvaluateResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return Evaluate(req), nil
}

// Evaluate returns the highest trust level among req.Attestations that
//
//   - parse (Parse),
//   - are signed (Verify) by a key in req.Keys whose ID equals the issuer,
//   - are for exactly req.PackageID, req.Version and req.ArtifactHash,
//   - and at req.NowUnix are issued no more than MaxClockSkew in the future
//     and not yet expired (now < expires_at).
//
// Ties go to the attestation that expires last. Issuer and ExpiresAtUnix of
// the response describe the chosen attestation. When none qualifies the
// level is "unknown" and Reason says why (see the Reason constants). A zero
// NowUnix means the current time.
func Evaluate(req *trust.EvaluateRequest) *trust.EvaluateResponse {
	if req == nil {
		return unknown(ReasonNoAttestation, "empty request")
	}
	if len(req.Attestations) == 0 {
		return unknown(ReasonNoAttestation, fmt.Sprintf("no attestation for %s@%s", req.PackageID, req.Version))
	}
	now := time.Unix(req.NowUnix, 0).UTC()
	if req.NowUnix == 0 {
		now = time.Now().UTC()
	}
	var best *Attestation
	failReason, failDetail := "", ""
	for i, raw := range req.Attestations {
		a, why, detail := check(req, raw, now)
		if why != "" {
			if progress[why] > progress[failReason] {
				failReason = why
				failDetail = fmt.Sprintf("attestation %d of %d: %s", i+1, len(req.Attestations), detail)
			}
			continue
		}
		if best == nil || trust.Rank(a.TrustLevel) > trust.Rank(best.TrustLevel) ||
			(a.TrustLevel == best.TrustLevel && a.ExpiresAt.After(best.ExpiresAt)) {
			best = a
		}
	}
	if best == nil {
		return unknown(failReason, failDetail)
	}
	return &trust.EvaluateResponse{
		Level:         best.TrustLevel,
		Issuer:        best.Issuer,
		Reason:        fmt.Sprintf("attested %s by %s until %s", best.TrustLevel, best.Issuer, formatTime(best.ExpiresAt)),
		ExpiresAtUnix: best.ExpiresAt.Unix(),
	}
}

// maxReason bounds the reason text, which may quote attacker-chosen values.
const maxReason = 512

func unknown(why, detail string) *trust.EvaluateResponse {
	r := why
	if detail != "" {
		r += ": " + detail
	}
	if len(r) > maxReason {
		r = strings.ToValidUTF8(r[:maxReason], "") + "..."
	}
	return &trust.EvaluateResponse{Level: trust.LevelUnknown, Reason: r}
}

// check runs every test on one attestation. It returns the attestation, or
// a reason constant and a detail message. The signature is checked before
// the contents are compared, so every later reason is about signed data.
func check(req *trust.EvaluateRequest, raw []byte, now time.Time) (*Attestation, string, string) {
	a, err := Parse(raw)
	if err != nil {
		return nil, ReasonMalformed, err.Error()
	}
	pinned, keyErrs := 0, []error{}
	verified := false
	for _, k := range req.Keys {
		if k.ID != a.Issuer {
			continue
		}
		pinned++
		pub, err := decodePublicKey(k.PublicKey)
		if err != nil {
			keyErrs = append(keyErrs, fmt.Errorf("pinned key %q: %w", k.ID, err))
			continue
		}
		if err := Verify(a, pub); err == nil {
			verified = true
			break
		}
	}
	switch {
	case verified:
	case pinned == 0:
		return nil, ReasonKeyNotPinned, fmt.Sprintf("issuer %q is not in trust.keys", a.Issuer)
	case len(keyErrs) == pinned:
		return nil, ReasonPinnedKeyInvalid, errors.Join(keyErrs...).Error()
	default:
		return nil, ReasonSignatureInvalid, fmt.Sprintf("signature does not verify with the pinned key of issuer %q", a.Issuer)
	}
	if a.PackageID != req.PackageID || a.Version != req.Version {
		return nil, ReasonOtherPackage, fmt.Sprintf("attestation is for %s@%s, not %s@%s", a.PackageID, a.Version, req.PackageID, req.Version)
	}
	if a.ArtifactHash != req.ArtifactHash {
		return nil, ReasonArtifactDiffers, fmt.Sprintf("attestation is for artifact %s, installed artifact is %s", a.ArtifactHash, req.ArtifactHash)
	}
	if a.IssuedAt.After(now.Add(MaxClockSkew)) {
		return nil, ReasonNotYetValid, fmt.Sprintf("issued_at %s is after %s", formatTime(a.IssuedAt), formatTime(now))
	}
	if !now.Before(a.ExpiresAt) {
		return nil, ReasonExpired, fmt.Sprintf("expired at %s", formatTime(a.ExpiresAt))
	}
	return a, "", ""
}

func decodePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not standard base64: %w", err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%d bytes, want %d", len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}
