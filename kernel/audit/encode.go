package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/agentnode/agentnode/kernel/jsonstr"
)

const (
	// maxReasonBytes caps Record.Reason; Append cuts a longer reason on a
	// rune boundary and ends it with "…".
	maxReasonBytes = 4096
	// maxLineBytes is the longest line Append writes and the verifier reads.
	maxLineBytes = 64 << 10
	// hashSuffixLen is len(`,"hash":"` + 64 hex + `"}`).
	hashSuffixLen = len(`,"hash":"`) + 64 + len(`"}`)
)

// appendBody appends the canonical serialization of r without its hash
// member (specs/audit.md): members in Record's field order, no whitespace,
// ts in UTC RFC 3339 with trailing zeros of the fraction removed, strings
// escaped as encoding/json does without HTML escaping (kernel/jsonstr), a nil guard_chain as
// [], workspace and runtime omitted when empty, exit_code and duration_ms omitted when
// nil.
func appendBody(dst []byte, r *Record) []byte {
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendUint(dst, r.Seq, 10)
	dst = append(dst, `,"ts":"`...)
	dst = r.TS.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, '"')
	dst = appendMember(dst, `,"event":`, r.Event)
	dst = appendMember(dst, `,"request_id":`, r.RequestID)
	dst = appendMember(dst, `,"package":`, r.Package)
	dst = appendMember(dst, `,"version":`, r.Version)
	dst = appendMember(dst, `,"tool":`, r.Tool)
	dst = appendMember(dst, `,"action":`, r.Action)
	dst = appendMember(dst, `,"trust":`, r.Trust)
	dst = appendMember(dst, `,"placement":`, r.Placement)
	dst = appendMember(dst, `,"backend":`, r.Backend)
	dst = appendMember(dst, `,"decision":`, r.Decision)
	dst = appendMember(dst, `,"code":`, r.Code)
	dst = appendMember(dst, `,"reason":`, r.Reason)
	dst = append(dst, `,"guard_chain":[`...)
	for i, g := range r.GuardChain {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonstr.Append(dst, g)
	}
	dst = append(dst, `],"env":{"ci":`...)
	dst = strconv.AppendBool(dst, r.Env.CI)
	dst = append(dst, `,"interactive":`...)
	dst = strconv.AppendBool(dst, r.Env.Interactive)
	dst = append(dst, `,"secrets_present":`...)
	dst = strconv.AppendBool(dst, r.Env.SecretsPresent)
	dst = append(dst, `,"root":`...)
	dst = strconv.AppendBool(dst, r.Env.Root)
	dst = append(dst, '}')
	if r.Workspace != "" {
		dst = appendMember(dst, `,"workspace":`, r.Workspace)
	}
	if r.Runtime != "" {
		dst = appendMember(dst, `,"runtime":`, r.Runtime)
	}
	if r.ExitCode != nil {
		dst = append(dst, `,"exit_code":`...)
		dst = strconv.AppendInt(dst, int64(*r.ExitCode), 10)
	}
	if r.DurationMS != nil {
		dst = append(dst, `,"duration_ms":`...)
		dst = strconv.AppendInt(dst, *r.DurationMS, 10)
	}
	dst = appendMember(dst, `,"prev":`, r.Prev)
	return append(dst, '}')
}

// seal turns body (from appendBody) into the record's line: it returns the
// hex hash of body and body with `,"hash":"<hash>"` inserted before the
// closing brace and a newline appended. body is reused.
func seal(body []byte) (line []byte, hash string) {
	sum := sha256.Sum256(body)
	var hx [64]byte
	hex.Encode(hx[:], sum[:])
	line = append(body[:len(body)-1], `,"hash":"`...)
	line = append(line, hx[:]...)
	line = append(line, "\"}\n"...)
	return line, string(hx[:])
}

// LineHasher computes a line's hash by the rule seal writes it with: the
// hex SHA-256 of the line without its hash member (the bytes before
// `,"hash":"`, then "}"). It is reused from line to line without
// allocating.
type LineHasher struct {
	h   hash.Hash
	sum [sha256.Size]byte
}

// NewLineHasher returns a LineHasher.
func NewLineHasher() *LineHasher { return &LineHasher{h: sha256.New()} }

// Sum writes to hx the hash of line, a record's line without its newline
// that ParseLine accepted (it ends in its hash member).
func (lh *LineHasher) Sum(line []byte, hx *[64]byte) {
	lh.h.Reset()
	lh.h.Write(line[:len(line)-hashSuffixLen])
	lh.h.Write([]byte{'}'})
	hex.Encode(hx[:], lh.h.Sum(lh.sum[:0]))
}

func appendMember(dst []byte, key, s string) []byte {
	return jsonstr.Append(append(dst, key...), s)
}

// truncateReason cuts s to at most maxReasonBytes bytes on a rune boundary,
// ending in "…" when it cut.
func truncateReason(s string) string {
	if len(s) <= maxReasonBytes {
		return s
	}
	const ell = "…"
	n := maxReasonBytes - len(ell)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ell
}
