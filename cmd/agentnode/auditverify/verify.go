// Package auditverify is the audit log's verifier: `agentnode audit verify`
// (VerifyAnchored, Verify), `agentnode audit reanchor` (Reanchor) and
// `agentnode audit` (Tail). It reads the log through kernel/audit's
// primitives (the file order and read lock, the line parser, the hash rule,
// the anchor's reader and seal check, the witness) and decides what they
// show; only front ends need that, so it sits here and not in the kernel,
// which keeps the writer and its one anchor writer (audit.WriteAnchor).
package auditverify

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/reason"
)

// Problems Verify reports.
const (
	ProblemTornLine        = "torn_line"                  // a file ends without a newline: an unfinished write
	ProblemParseError      = audit.ProblemParseError      // a line is not a JSON record in the record layout
	ProblemSchemaViolation = audit.ProblemSchemaViolation // JSON, but not valid against the record schema
	ProblemHashMismatch    = "hash_mismatch"              // the record's bytes changed after it was written
	ProblemPrevMismatch    = "prev_mismatch"              // prev is not the previous record's hash
	ProblemSeqGap          = "seq_gap"                    // records are missing
	ProblemSeqOrder        = "seq_order"                  // records are out of order or repeated
	ProblemHeadMissing     = "head_missing"               // the oldest records are gone, and not by rotation

	// Found by VerifyAnchored, on a chain that is intact by itself.
	ProblemAnchorMismatch = "anchor_mismatch" // the log does not end where its sealed anchor says
	ProblemAnchorInvalid  = "anchor_invalid"  // the anchor is malformed, bound to another log, or its seal does not hold
	ProblemAnchorMissing  = "anchor_missing"  // the anchor is gone, but the keychain's witness says the log was sealed
	ProblemAnchorUnsealed = "anchor_unsealed" // the anchor is unsealed, but the log was sealed before
	ProblemRollback       = "rollback"        // the log is older than its witness: log and anchor were put back
)

// Report is the result of Verify.
type Report struct {
	OK      bool `json:"ok"`
	Records int  `json:"records"` // records verified (up to the first problem)
	Files   int  `json:"files"`
	// FirstSeq and LastSeq bound the verified records; LastHash is the head
	// of the chain (anchor it elsewhere to detect a cut-off tail).
	FirstSeq uint64 `json:"first_seq,omitempty"`
	LastSeq  uint64 `json:"last_seq,omitempty"`
	LastHash string `json:"last_hash,omitempty"`
	// Anchor is the prev of the oldest record when older records were
	// rotated away: it cannot be checked and is accepted as the start of
	// the chain. Empty when the log starts at seq 1.
	Anchor string `json:"anchor,omitempty"`
	// FirstBadSeq is the seq the first broken record should have had (for a
	// missing record, the first missing seq); 0 when OK.
	FirstBadSeq uint64 `json:"first_bad_seq"`
	Problem     string `json:"problem"`
	Detail      string `json:"detail"`
	File        string `json:"file,omitempty"` // base name of the file with the problem
	Line        int    `json:"line,omitempty"` // 1-based line in File

	// Seal is what VerifyAnchored found about the anchor; nil from Verify.
	Seal *SealReport `json:"seal,omitempty"`
	// Warnings: what could not be vouched for although nothing was found
	// broken (an unsealed anchor, a seal that could not be checked, a log
	// not anchored yet, runs without an outcome). `agentnode audit verify
	// --strict` fails on them.
	Warnings []string `json:"warnings,omitempty"`
	// Unfinished lists the runs that were allowed (a decision record with
	// decision allow) but have no outcome record after it, oldest first:
	// runs still going, or runs whose agentnode was killed or could not
	// write the outcome. Each also makes one warning.
	Unfinished []UnfinishedRun `json:"unfinished,omitempty"`
}

// UnfinishedRun is an allowed run with no outcome record.
type UnfinishedRun struct {
	Seq       uint64 `json:"seq"` // of its decision record
	RequestID string `json:"request_id"`
}

// Verify checks the whole log in dir, oldest file first: every line a record
// valid against the schema, every hash matching the record's bytes, seq
// increasing by one and prev equal to the previous hash, across rotated
// files. It stops at the first problem. A missing log is OK with 0 records.
// Integrity problems are reported in the Report; the error is only for
// failing to read (wrapping reason.ErrAuditUnavailable).
//
// Records are checked against the schema by audit.ParseLine, which
// implements every constraint of specs/schema/audit-record.schema.json
// without allocating for lines in the layout Append writes; other lines,
// and the first line of each file, go through the JSON Schema validator
// itself.
func Verify(dir string) (*Report, error) { return verify(dir, false) }

// verify is Verify; fullSchema also runs the JSON Schema validator on every
// line (slow; tests use it to cross-check).
func verify(dir string, fullSchema bool) (*Report, error) {
	lk, err := audit.ReadLock(dir)
	if err != nil {
		return nil, unavailable("lock audit log for reading: %w", err)
	}
	defer audit.ReadUnlock(lk)
	return verifyLocked(dir, fullSchema, nil)
}

func unavailable(format string, args ...any) error {
	return reason.New(reason.AuditUnavailable, format, args...)
}

// verifyLocked is verify with the lock held by the caller. watch, if not
// nil, maps seqs to fill in with the hashes of those records.
func verifyLocked(dir string, fullSchema bool, watch map[uint64]string) (*Report, error) {
	files, err := audit.ListFiles(dir)
	if err != nil {
		return nil, unavailable("list audit files: %w", err)
	}
	v := &verifier{dir: dir, files: files, full: fullSchema, h: audit.NewLineHasher(), rep: &Report{Files: len(files)}, watch: watch}
	for i := range files {
		done, err := v.file(i)
		if err != nil {
			return nil, unavailable("read audit log: %w", err)
		}
		if done {
			break
		}
	}
	r := v.rep
	r.OK = r.Problem == ""
	if v.have {
		r.LastSeq, r.LastHash = v.lastSeq, string(v.lastHash[:])
	}
	if r.OK {
		v.unfinished()
	}
	return r, nil
}

// unfinished reports the allowed runs left without an outcome.
func (v *verifier) unfinished() {
	for id, seq := range v.running {
		v.rep.Unfinished = append(v.rep.Unfinished, UnfinishedRun{Seq: seq, RequestID: id})
	}
	sort.Slice(v.rep.Unfinished, func(i, j int) bool { return v.rep.Unfinished[i].Seq < v.rep.Unfinished[j].Seq })
	for _, u := range v.rep.Unfinished {
		v.rep.Warnings = append(v.rep.Warnings, fmt.Sprintf("the run of request %s was allowed (decision seq %d) but has no outcome record: it is still running, or agentnode was killed or could not write the outcome", u.RequestID, u.Seq))
	}
}

type verifier struct {
	dir   string
	files []audit.LogFile
	full  bool
	rep   *Report
	watch map[uint64]string

	h        *audit.LineHasher
	hx       [64]byte
	have     bool // a record was verified
	lastSeq  uint64
	lastHash [64]byte

	fileIdx int
	lineNo  int
	off     int64 // bytes of the current file consumed, through the current line

	// running maps the request id of each allowed decision seen to its
	// seq until the run's outcome record is seen.
	running map[string]uint64
}

// file verifies one file; done means a problem was found.
func (v *verifier) file(i int) (done bool, err error) {
	v.fileIdx, v.lineNo, v.off = i, 0, 0
	f, err := bounded.Open(filepath.Join(v.dir, v.files[i].Name), os.O_RDONLY, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 256<<10)
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			if len(line) > 0 {
				v.lineNo++
				v.fail(ProblemTornLine, v.expected(line), fmt.Sprintf("the file ends in an unfinished line of %d bytes (a write was interrupted, or the line was cut)", len(line)))
				return true, nil
			}
			return false, nil
		case errors.Is(err, bufio.ErrBufferFull):
			v.lineNo++
			v.fail(ProblemParseError, v.expected(line), fmt.Sprintf("line longer than %d bytes", len(line)))
			return true, nil
		default:
			return false, err
		}
		v.lineNo++
		v.off += int64(len(line))
		if !v.check(line[:len(line)-1]) {
			return true, nil
		}
	}
}

// check verifies one line against the chain so far.
func (v *verifier) check(line []byte) bool {
	li, p, detail := audit.ParseLine(line, v.full || v.lineNo == 1)
	if p != "" {
		v.fail(p, v.expected(line), detail)
		return false
	}
	v.h.Sum(line, &v.hx)
	if !bytes.Equal(v.hx[:], li.Hash) {
		v.fail(ProblemHashMismatch, v.expected(line), fmt.Sprintf("record seq %d: stored hash %.16s…, computed %.16s…: the record was changed after it was written", li.Seq, li.Hash, v.hx[:]))
		return false
	}
	if v.have {
		want := v.lastSeq + 1
		switch {
		case li.Seq < want:
			v.fail(ProblemSeqOrder, want, fmt.Sprintf("seq %d follows seq %d", li.Seq, v.lastSeq))
			return false
		case li.Seq > want && v.seqLater(want):
			v.fail(ProblemSeqOrder, want, fmt.Sprintf("seq %d comes before seq %d", li.Seq, want))
			return false
		case li.Seq > want:
			v.fail(ProblemSeqGap, want, fmt.Sprintf("seq %d follows seq %d: %d record(s) missing", li.Seq, v.lastSeq, li.Seq-want))
			return false
		}
		if !bytes.Equal(li.Prev, v.lastHash[:]) {
			v.fail(ProblemPrevMismatch, li.Seq, fmt.Sprintf("prev %.16s… of seq %d is not the hash %.16s… of seq %d", li.Prev, li.Seq, v.lastHash[:], v.lastSeq))
			return false
		}
	} else {
		switch {
		case li.Seq == 1 && string(li.Prev) != audit.Genesis:
			v.fail(ProblemPrevMismatch, 1, "the first record (seq 1) must have prev = 64 zeros")
			return false
		case li.Seq != 1 && v.files[v.fileIdx].N == 0:
			v.fail(ProblemHeadMissing, 1, fmt.Sprintf("the log has no rotated files yet starts at seq %d: records 1..%d are missing", li.Seq, li.Seq-1))
			return false
		case li.Seq != 1:
			// Older files were rotated away: the first prev is the anchor.
			v.rep.Anchor = string(li.Prev)
		}
		v.rep.FirstSeq = li.Seq
	}
	v.have = true
	v.lastSeq = li.Seq
	copy(v.lastHash[:], li.Hash)
	if _, ok := v.watch[li.Seq]; ok {
		v.watch[li.Seq] = string(li.Hash)
	}
	v.rep.Records++
	v.pair(li)
	return true
}

// pair follows runs from their allowed decision to their outcome. An
// outcome whose decision was rotated away is ignored.
func (v *verifier) pair(li audit.Line) {
	switch {
	case string(li.Event) == audit.EventDecision && string(li.Decision) == "allow":
		if v.running == nil {
			v.running = map[string]uint64{}
		}
		v.running[string(li.RequestID)] = li.Seq
	case string(li.Event) == audit.EventOutcome:
		delete(v.running, string(li.RequestID))
	}
}

func (v *verifier) fail(problem string, seq uint64, detail string) {
	v.rep.Problem, v.rep.FirstBadSeq, v.rep.Detail = problem, seq, detail
	v.rep.File, v.rep.Line = v.files[v.fileIdx].Name, v.lineNo
}

// expected is the seq the record on a bad line should have: one after the
// last good record, 1 at the start of an unrotated log, else the line's own
// seq if it can be read at all.
func (v *verifier) expected(line []byte) uint64 {
	switch {
	case v.have:
		return v.lastSeq + 1
	case v.files[v.fileIdx].N == 0 && v.fileIdx == 0:
		return 1
	}
	s, _ := guessSeq(line)
	return s
}

// seqLater reports whether a record with seq want appears after the
// current line (then records were reordered rather than deleted).
func (v *verifier) seqLater(want uint64) bool {
	for i := v.fileIdx; i < len(v.files); i++ {
		f, err := bounded.Open(filepath.Join(v.dir, v.files[i].Name), os.O_RDONLY, 0)
		if err != nil {
			return false
		}
		if i == v.fileIdx {
			if _, err := f.Seek(v.off, io.SeekStart); err != nil {
				_ = f.Close()
				return false
			}
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if s, ok := guessSeq(sc.Bytes()); ok && s == want {
				_ = f.Close()
				return true
			}
		}
		_ = f.Close()
	}
	return false
}

// guessSeq reads the seq of a line that may not be a valid record.
func guessSeq(line []byte) (uint64, bool) {
	if li, p, _ := audit.ParseLine(line, false); p == "" {
		return li.Seq, true
	}
	_, rest, ok := bytes.Cut(line, []byte(`"seq":`))
	if !ok {
		return 0, false
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	s, err := strconv.ParseUint(string(rest[:n]), 10, 64)
	return s, err == nil
}
