package audit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/agentnode/agentnode/kernel/bounded"
)

// Problems Verify reports.
const (
	ProblemTornLine        = "torn_line"        // a file ends without a newline: an unfinished write
	ProblemParseError      = "parse_error"      // a line is not a JSON record in the record layout
	ProblemSchemaViolation = "schema_violation" // JSON, but not valid against the record schema
	ProblemHashMismatch    = "hash_mismatch"    // the record's bytes changed after it was written
	ProblemPrevMismatch    = "prev_mismatch"    // prev is not the previous record's hash
	ProblemSeqGap          = "seq_gap"          // records are missing
	ProblemSeqOrder        = "seq_order"        // records are out of order or repeated
	ProblemHeadMissing     = "head_missing"     // the oldest records are gone, and not by rotation

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
// Records are checked against the schema by scanCanonical, which implements
// every constraint of specs/schema/audit-record.schema.json without
// allocating, for lines in the layout Append writes; other lines, and the
// first line of each file, go through the JSON Schema validator itself.
func Verify(dir string) (*Report, error) { return verify(dir, false) }

// verify is Verify; fullSchema also runs the JSON Schema validator on every
// line (slow; tests use it to cross-check).
func verify(dir string, fullSchema bool) (*Report, error) {
	lk, err := readLock(dir)
	if err != nil {
		return nil, unavailable("lock audit log for reading: %w", err)
	}
	defer readUnlock(lk)
	return verifyLocked(dir, fullSchema, nil)
}

// verifyLocked is verify with the lock held by the caller. watch, if not
// nil, maps seqs to fill in with the hashes of those records.
func verifyLocked(dir string, fullSchema bool, watch map[uint64]string) (*Report, error) {
	files, err := listFiles(dir)
	if err != nil {
		return nil, unavailable("list audit files: %w", err)
	}
	v := &verifier{dir: dir, files: files, full: fullSchema, h: sha256.New(), rep: &Report{Files: len(files)}, watch: watch}
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
	files []logFile
	full  bool
	rep   *Report
	watch map[uint64]string

	h        hash.Hash
	sum      [sha256.Size]byte
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
	f, err := bounded.Open(filepath.Join(v.dir, v.files[i].name), os.O_RDONLY, 0)
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
	li, ok := scanCanonical(line)
	if ok && (v.full || v.lineNo == 1) {
		if err := validateSchema(line); err != nil {
			v.fail(ProblemSchemaViolation, v.expected(line), err.Error())
			return false
		}
	}
	if !ok {
		var p, detail string
		if li, p, detail = parseSlow(line); p != "" {
			v.fail(p, v.expected(line), detail)
			return false
		}
	}
	v.h.Reset()
	v.h.Write(line[:len(line)-hashSuffixLen])
	v.h.Write([]byte{'}'})
	hex.Encode(v.hx[:], v.h.Sum(v.sum[:0]))
	if !bytes.Equal(v.hx[:], li.hash) {
		v.fail(ProblemHashMismatch, v.expected(line), fmt.Sprintf("record seq %d: stored hash %.16s…, computed %.16s…: the record was changed after it was written", li.seq, li.hash, v.hx[:]))
		return false
	}
	if v.have {
		want := v.lastSeq + 1
		switch {
		case li.seq < want:
			v.fail(ProblemSeqOrder, want, fmt.Sprintf("seq %d follows seq %d", li.seq, v.lastSeq))
			return false
		case li.seq > want && v.seqLater(want):
			v.fail(ProblemSeqOrder, want, fmt.Sprintf("seq %d comes before seq %d", li.seq, want))
			return false
		case li.seq > want:
			v.fail(ProblemSeqGap, want, fmt.Sprintf("seq %d follows seq %d: %d record(s) missing", li.seq, v.lastSeq, li.seq-want))
			return false
		}
		if !bytes.Equal(li.prev, v.lastHash[:]) {
			v.fail(ProblemPrevMismatch, li.seq, fmt.Sprintf("prev %.16s… of seq %d is not the hash %.16s… of seq %d", li.prev, li.seq, v.lastHash[:], v.lastSeq))
			return false
		}
	} else {
		switch {
		case li.seq == 1 && string(li.prev) != Genesis:
			v.fail(ProblemPrevMismatch, 1, "the first record (seq 1) must have prev = 64 zeros")
			return false
		case li.seq != 1 && v.files[v.fileIdx].n == 0:
			v.fail(ProblemHeadMissing, 1, fmt.Sprintf("the log has no rotated files yet starts at seq %d: records 1..%d are missing", li.seq, li.seq-1))
			return false
		case li.seq != 1:
			// Older files were rotated away: the first prev is the anchor.
			v.rep.Anchor = string(li.prev)
		}
		v.rep.FirstSeq = li.seq
	}
	v.have = true
	v.lastSeq = li.seq
	copy(v.lastHash[:], li.hash)
	if _, ok := v.watch[li.seq]; ok {
		v.watch[li.seq] = string(li.hash)
	}
	v.rep.Records++
	v.pair(li)
	return true
}

// pair follows runs from their allowed decision to their outcome. An
// outcome whose decision was rotated away is ignored.
func (v *verifier) pair(li lineInfo) {
	switch {
	case string(li.event) == EventDecision && string(li.decision) == "allow":
		if v.running == nil {
			v.running = map[string]uint64{}
		}
		v.running[string(li.requestID)] = li.seq
	case string(li.event) == EventOutcome:
		delete(v.running, string(li.requestID))
	}
}

func (v *verifier) fail(problem string, seq uint64, detail string) {
	v.rep.Problem, v.rep.FirstBadSeq, v.rep.Detail = problem, seq, detail
	v.rep.File, v.rep.Line = v.files[v.fileIdx].name, v.lineNo
}

// expected is the seq the record on a bad line should have: one after the
// last good record, 1 at the start of an unrotated log, else the line's own
// seq if it can be read at all.
func (v *verifier) expected(line []byte) uint64 {
	switch {
	case v.have:
		return v.lastSeq + 1
	case v.files[v.fileIdx].n == 0 && v.fileIdx == 0:
		return 1
	}
	s, _ := guessSeq(line)
	return s
}

// seqLater reports whether a record with seq want appears after the
// current line (then records were reordered rather than deleted).
func (v *verifier) seqLater(want uint64) bool {
	for i := v.fileIdx; i < len(v.files); i++ {
		f, err := bounded.Open(filepath.Join(v.dir, v.files[i].name), os.O_RDONLY, 0)
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
	if li, ok := scanCanonical(line); ok {
		return li.seq, true
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
