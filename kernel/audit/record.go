// Package audit is agentnode's local, append-only, hash-chained audit log:
// audit/audit.jsonl below AGENTNODE_HOME, one JSON record per line.
//
// Every record carries the hash of the record before it (prev) and its own
// hash, a SHA-256 over the record's exact bytes without the hash member
// (specs/audit.md). Append makes a record durable (fdatasync) before it
// returns and is safe for several processes appending at the same time (an
// flock on audit.lock serialises them). The log rotates by size into
// audit.jsonl.1, .2, ... and the chain continues across files.
//
// With Options.Anchor the head of the chain is also sealed outside the log
// (anchor.go: HMAC under the lockfile seal key, lockfile.MAC), written in place
// into one of two slots as an intent before each record and into the other
// as a commit after it, and a witness of the head is kept in the OS
// keychain, so that the verifier can detect truncation, re-chaining, forged
// appends, an emptied or deleted log and rollbacks older than the last
// verify too.
//
// It is in the trusted core because no run happens without an append
// (kernel/dispatch), and each append checks the log's end against its
// sealed anchor, recovers a torn last line and moves the anchor on. The
// verifier (Verify, VerifyAnchored, Reanchor, Tail) serves only the front
// end (`agentnode audit`, doctor) and lives there, in
// cmd/agentnode/auditverify; it reads the log through the primitives this
// package exports, one implementation each, shared with Append: the line
// reader (ParseLine) and the schema, the hash rule (LineHasher), the file
// order and the read lock (ListFiles, ReadLock), the anchor's reader and
// seal check (ReadAnchor, AnchorState), the keychain witness (GetWitness,
// SetWitness) and the one anchor writer for re-anchoring (WriteAnchor).
//
// The Record type has no field for tool inputs or outputs, secrets or lockfile
// contents, so they cannot end up in the log. Every failure to open, write or
// sync the log wraps reason.ErrAuditUnavailable: if the audit cannot be
// written, nothing runs.
//
// ParseLine reads each line with a hand-written scanner of the canonical
// layout Append writes (scanCanonical, parse.go) and falls back to the
// reference, encoding/json plus the JSON Schema (parseSlow), only for a
// line the scanner does not accept. It stays because it is about 100 times
// faster: BenchmarkScanCanonical 430-920 ns and no allocation per typical
// record, against BenchmarkParseSlow 73-75 µs and 261 allocations (2
// cores), which is what keeps verifying a large log fast (BenchmarkVerify
// in cmd/agentnode/auditverify).
// FuzzScanCanonical, in the fuzz loop of test/run.sh (make test, CI),
// holds it to the reference: whatever the scanner accepts, parseSlow
// accepts with the same chain fields (seq, prev, hash, event, request id,
// decision); what it refuses, parseSlow decides.
//
// It is in the trusted core because a run goes ahead only once its decision
// record is durable, and no other code writes the log.
package audit

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// Events. Others may be added later; the schema accepts any lower-case word.
const (
	EventDecision = "decision" // a tool may or may not run; written before it starts
	EventOutcome  = "outcome"  // a tool ran; exit code and duration
	EventTornTail = "torn_tail"
)

// NewRequestID is a fresh request id: 24 hex digits of randomness (the
// clock when there is none), tying a request's records together.
func NewRequestID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Sprintf("req-%d", time.Now().UnixNano())
	}
	return hex.EncodeToString(b[:])
}

// Genesis is the prev of the first record ever written (seq 1).
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// Record is one audit record. The field order is the serialization order
// (specs/audit.md). Append fills Seq, TS, Prev and Hash.
type Record struct {
	Seq        uint64    `json:"seq"`
	TS         time.Time `json:"ts"`
	Event      string    `json:"event"`
	RequestID  string    `json:"request_id"`
	Package    string    `json:"package"`
	Version    string    `json:"version"`
	Tool       string    `json:"tool"`
	Action     string    `json:"action"`
	Trust      string    `json:"trust"`
	Placement  string    `json:"placement"` // host | sandbox | none
	Backend    string    `json:"backend"`
	Decision   string    `json:"decision"` // allow | prompt | deny
	Code       string    `json:"code"`
	Reason     string    `json:"reason"`
	GuardChain []string  `json:"guard_chain"`
	Env        Env       `json:"env"`
	// Workspace is what the run was granted of the workspace the user
	// named ("read-only /path", "read-write /path", "not granted
	// (filesystem level none): /path"); omitted when none was named.
	Workspace  string `json:"workspace,omitempty"`
	Runtime    string `json:"runtime,omitempty"` // sandbox runtime: native | gvisor; absent on the host
	ExitCode   *int   `json:"exit_code,omitempty"`
	DurationMS *int64 `json:"duration_ms,omitempty"`
	Prev       string `json:"prev"`
	Hash       string `json:"hash"`
}

// Env describes the environment a decision was made in. Booleans only: the
// log never holds environment values.
type Env struct {
	CI             bool `json:"ci"`
	Interactive    bool `json:"interactive"`
	SecretsPresent bool `json:"secrets_present"`
	Root           bool `json:"root"`
}
