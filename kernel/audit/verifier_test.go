package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// The verifier (cmd/agentnode/auditverify: Verify, VerifyAnchored,
// Reanchor, Tail) imports this package, so the tests here, which check what
// Append and the anchor writers leave behind, reach it through the hooks
// that hooks_test.go (package audit_test, which may import it) sets, and
// read its reports as JSON into Report below: the verifier's wire form.
var (
	VerifyHook         func(dir string) (any, error)
	VerifyAnchoredHook func(dir string, a *Anchor) (any, error)
	ReanchorHook       func(dir string, a *Anchor) (any, error)
	TailHook           func(dir string, n int) ([]Record, error)
)

// Report is the verifier's report as `agentnode audit verify --json` shows it.
type Report struct {
	OK          bool            `json:"ok"`
	Records     int             `json:"records"`
	Files       int             `json:"files"`
	FirstSeq    uint64          `json:"first_seq,omitempty"`
	LastSeq     uint64          `json:"last_seq,omitempty"`
	LastHash    string          `json:"last_hash,omitempty"`
	Anchor      string          `json:"anchor,omitempty"`
	FirstBadSeq uint64          `json:"first_bad_seq"`
	Problem     string          `json:"problem"`
	Detail      string          `json:"detail"`
	File        string          `json:"file,omitempty"`
	Line        int             `json:"line,omitempty"`
	Seal        *SealReport     `json:"seal,omitempty"`
	Warnings    []string        `json:"warnings,omitempty"`
	Unfinished  []UnfinishedRun `json:"unfinished,omitempty"`
}

// SealReport is the report's seal member.
type SealReport struct {
	Status     string `json:"status"`
	KeyID      string `json:"key_id,omitempty"`
	HeadSeq    uint64 `json:"head_seq"`
	HeadHash   string `json:"head_hash,omitempty"`
	Pending    bool   `json:"pending,omitempty"`
	Torn       bool   `json:"torn,omitempty"`
	WitnessSeq uint64 `json:"witness_seq,omitempty"`
	Witness    string `json:"witness"`
}

// UnfinishedRun is an allowed run with no outcome record.
type UnfinishedRun struct {
	Seq       uint64 `json:"seq"`
	RequestID string `json:"request_id"`
}

// The report's problems and seal statuses, as they appear in it.
const (
	ProblemTornLine       = "torn_line"
	ProblemHashMismatch   = "hash_mismatch"
	ProblemPrevMismatch   = "prev_mismatch"
	ProblemSeqGap         = "seq_gap"
	ProblemSeqOrder       = "seq_order"
	ProblemHeadMissing    = "head_missing"
	ProblemAnchorMismatch = "anchor_mismatch"
	ProblemAnchorInvalid  = "anchor_invalid"
	ProblemAnchorMissing  = "anchor_missing"
	ProblemAnchorUnsealed = "anchor_unsealed"
	ProblemRollback       = "rollback"

	SealVerified     = "verified"
	SealUnverifiable = "unverifiable"
	SealUnsealed     = "unsealed"
	SealMissing      = "missing"
	SealBroken       = "broken"
)

func asReport(r any, err error) (*Report, error) {
	data, merr := json.Marshal(r)
	if merr != nil {
		panic(merr)
	}
	var rep *Report
	if merr := json.Unmarshal(data, &rep); merr != nil {
		panic(merr)
	}
	return rep, err
}

func Verify(dir string) (*Report, error) { return asReport(VerifyHook(dir)) }

func VerifyAnchored(dir string, a *Anchor) (*Report, error) {
	return asReport(VerifyAnchoredHook(dir, a))
}

func Reanchor(dir string, a *Anchor) (*Report, error) { return asReport(ReanchorHook(dir, a)) }

func Tail(dir string, n int) ([]Record, error) { return TailHook(dir, n) }

// verify is Verify; full also runs the JSON Schema validator itself on every
// line of an intact log (slow), to cross-check ParseLine's scanner.
func verify(dir string, full bool) (*Report, error) {
	rep, err := Verify(dir)
	if err != nil || !full || !rep.OK {
		return rep, err
	}
	files, err := ListFiles(dir)
	if err != nil {
		return nil, err
	}
	for _, lf := range files {
		f, err := os.Open(filepath.Join(dir, lf.Name))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, maxLineBytes+1), maxLineBytes+1)
		for n := 1; sc.Scan(); n++ {
			if err := validateSchema(sc.Bytes()); err != nil {
				_ = f.Close()
				return &Report{Problem: ProblemSchemaViolation, File: lf.Name, Line: n, Detail: err.Error()}, nil
			}
		}
		_ = f.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", lf.Name, err)
		}
	}
	return rep, nil
}
