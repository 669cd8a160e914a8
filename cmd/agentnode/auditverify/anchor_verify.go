package auditverify

import (
	"errors"
	"fmt"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/keychain"
)

// Seal statuses of a SealReport.
const (
	SealVerified     = "verified"     // sealed, and the seal holds under this machine's key
	SealUnverifiable = "unverifiable" // sealed, but the key could not be read
	SealUnsealed     = "unsealed"     // written without an OS keychain
	SealMissing      = "missing"      // no anchor file
	SealBroken       = "broken"       // malformed, bound to another log, or the seal does not hold
)

// SealReport is what VerifyAnchored found about the anchor.
type SealReport struct {
	Status string `json:"status"`
	KeyID  string `json:"key_id,omitempty"`
	// HeadSeq and HeadHash: the head the anchor names.
	HeadSeq  uint64 `json:"head_seq"`
	HeadHash string `json:"head_hash,omitempty"`
	// Pending: the log ends at the record an append was writing when it
	// stopped (crash) before sealing it as the head; the anchor named that
	// exact record (seq and hash) beforehand.
	Pending bool `json:"pending,omitempty"`
	// Torn: one of the anchor's two slots is not intact (a crash tore its
	// write, or it was overwritten); the other one decided where the log
	// must end, with no slack (specs/audit.md).
	Torn bool `json:"torn,omitempty"`
	// WitnessSeq is the head the keychain's witness held (checked against
	// the log); Witness says whether it was checked or why not, and whether
	// this verify moved it on.
	WitnessSeq uint64 `json:"witness_seq,omitempty"`
	Witness    string `json:"witness"`
}

// VerifyAnchored is Verify, and then, if the chain is intact by itself,
// checks that it ends where its anchor a says (truncation, rewriting with
// recomputed hashes, records appended outside agentnode, an emptied or
// deleted log) and that it still holds the head its witness in the OS
// keychain remembers (a rollback of log and anchor together, a deleted
// anchor). When all holds and the anchor's seal was checked, the witness is
// moved on to the log's head. Integrity problems are in the Report; the
// error is for failing to read.
func VerifyAnchored(dir string, a *audit.Anchor) (*Report, error) {
	lk, err := audit.ReadLock(dir)
	if err != nil {
		return nil, unavailable("lock audit log for reading: %w", err)
	}
	defer audit.ReadUnlock(lk)
	cdir, err := audit.CanonicalDir(dir)
	if err != nil {
		return nil, unavailable("audit anchor: %w", err)
	}
	af, aerr := audit.ReadAnchor(a.Path)
	if errors.Is(aerr, audit.ErrNoAnchor) {
		af, aerr = nil, nil
	}
	var key []byte
	kerr := error(keychain.ErrUnavailable)
	if a.Key != nil && af != nil && af.Sealed() {
		key, kerr = a.Key(af.KeyID())
	}
	var wit *audit.Head
	var werr error
	if a.Witness != "" {
		wit, werr = audit.GetWitness(a.Witness, cdir)
	}
	watch := map[uint64]string{}
	var want audit.Head // where the anchor says the log ends
	var pending *audit.Head
	if af != nil {
		want, pending = af.Expect()
		watch[want.Seq] = ""
	}
	if wit != nil {
		watch[wit.Seq] = ""
	}
	rep, err := verifyLocked(dir, false, watch)
	if err != nil {
		return nil, err
	}
	sr := &SealReport{Status: SealMissing, Witness: "none"}
	rep.Seal = sr
	switch {
	case werr != nil:
		sr.Witness = "unchecked: " + werr.Error()
	case wit != nil:
		sr.WitnessSeq, sr.Witness = wit.Seq, "checked"
	}
	if !rep.OK {
		return rep, nil // the chain itself is broken: that comes first
	}
	if werr != nil {
		rep.Warnings = append(rep.Warnings, "the witness in the OS keychain could not be read, so a rollback of log and anchor to an older copy, or a deleted anchor with its log, cannot be detected: "+werr.Error())
	}
	last := chainHead(rep)
	bad := func(problem string, seq uint64, format string, args ...any) (*Report, error) {
		rep.OK, rep.Problem, rep.FirstBadSeq, rep.Detail = false, problem, seq, fmt.Sprintf(format, args...)
		rep.File, rep.Line = "", 0 // the whole log, not one line of it
		return rep, nil
	}

	// The anchor itself.
	switch {
	case aerr != nil:
		sr.Status = SealBroken
		return bad(ProblemAnchorInvalid, last.Seq+1, "%v", aerr)
	case af == nil && wit != nil:
		return bad(ProblemAnchorMissing, last.Seq+1, "the anchor %s is gone, but this log was sealed (the OS keychain's witness is at seq %d): the anchor was deleted", a.Path, wit.Seq)
	case af == nil && rep.Records > 0:
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("the log has no anchor (%s): it was written before anchoring, or the anchor was deleted; cut-off records cannot be detected until the next run anchors it", a.Path))
	case af == nil:
		// A log that never held a record, and no witness: a new home.
	case af.Dir() != cdir:
		sr.Status = SealBroken
		return bad(ProblemAnchorInvalid, last.Seq+1, "the anchor belongs to the log in %s, not to this one in %s: it was copied from elsewhere (after moving a home on purpose, accept it with `agentnode audit reanchor`)", af.Dir(), cdir)
	case !af.Sealed() && wit != nil:
		sr.Status = SealUnsealed
		return bad(ProblemAnchorUnsealed, last.Seq+1, "the anchor is not sealed, but this log was sealed before (the OS keychain's witness is at seq %d): the anchor was replaced", wit.Seq)
	case !af.Sealed():
		sr.Status = SealUnsealed
		rep.Warnings = append(rep.Warnings, "the anchor is not sealed (written without an OS keychain): whoever can write the files can rewrite the anchor with the log, so cutting off or rewriting records is detected only if the anchor was not rewritten too")
	case kerr != nil:
		sr.Status, sr.KeyID = SealUnverifiable, af.KeyID()
		rep.Warnings = append(rep.Warnings, "the anchor's seal could not be checked: "+kerr.Error())
	default:
		sr.KeyID = af.KeyID()
		if why := af.CheckSeal(key); why != "" {
			sr.Status = SealBroken
			return bad(ProblemAnchorInvalid, last.Seq+1, "%s", why)
		}
		sr.Status = SealVerified
	}

	// The log against the anchor.
	if af != nil {
		sr.HeadSeq, sr.HeadHash, sr.Torn = want.Seq, want.Hash, af.Torn()
		n, l := want.Seq, last.Seq
		switch {
		case af.Matches(last):
			sr.Pending = pending != nil && last == *pending
		case rep.Records == 0:
			return bad(ProblemAnchorMismatch, 1, "the log holds no records, but its anchor says it ends at seq %d (hash %.16s…): the log was emptied or deleted", n, want.Hash)
		case l < n:
			return bad(ProblemAnchorMismatch, l+1, "the log ends at seq %d, but its anchor says it ends at seq %d (hash %.16s…): records %d..%d were cut off", l, n, want.Hash, l+1, n)
		case watch[n] != want.Hash && n >= rep.FirstSeq:
			return bad(ProblemAnchorMismatch, n, "record seq %d has hash %.16s…, but the anchor sealed %.16s…: the records were rewritten and their hashes recomputed", n, watch[n], want.Hash)
		default:
			return bad(ProblemAnchorMismatch, n+1, "the log goes on past its anchored head (seq %d) to seq %d: records %d..%d were not written by agentnode (appended or replaced outside it)", n, l, n+1, l)
		}
	}

	// The log against its witness.
	if wit != nil {
		switch {
		case last.Seq < wit.Seq:
			return bad(ProblemRollback, last.Seq+1, "the log ends at seq %d, but it had reached seq %d (hash %.16s…) when its witness in the OS keychain was set: the log and its anchor were put back to an older copy, or cut off", last.Seq, wit.Seq, wit.Hash)
		case wit.Seq >= rep.FirstSeq && wit.Seq > 0 && watch[wit.Seq] != wit.Hash:
			return bad(ProblemRollback, wit.Seq, "record seq %d has hash %.16s…, but its witness in the OS keychain holds %.16s…: the log and its anchor were replaced", wit.Seq, watch[wit.Seq], wit.Hash)
		}
	}

	// All holds: move the witness on (only with a checked seal, so that no
	// forged anchor is ever remembered).
	if sr.Status == SealVerified && a.Witness != "" && werr == nil && (wit == nil || last.Seq > wit.Seq) {
		if err := audit.SetWitness(a.Witness, cdir, last); err != nil {
			rep.Warnings = append(rep.Warnings, "the witness in the OS keychain could not be moved on: "+err.Error())
		} else {
			sr.WitnessSeq, sr.Witness = last.Seq, "checked, moved on"
			if wit == nil {
				sr.Witness = "set"
			}
		}
	}
	return rep, nil
}

// Reanchor accepts the log in dir as it is now: its chain must be intact
// by itself; its head becomes the anchor (sealed if there is a key) and the
// witness, written by audit.WriteAnchor under the log's write lock. It is
// how a log is anchored after moving a home or starting over (moving the
// audit directory aside), or accepted after a tamper was investigated.
// Without an OS keychain it writes an unsealed anchor, but it refuses to
// replace a sealed one. Errors wrap reason.ErrAuditUnavailable; with a
// broken chain, the Report says where.
func Reanchor(dir string, a *audit.Anchor) (*Report, error) {
	var rep *Report
	done, err := audit.WriteAnchor(dir, a, func() (audit.Head, error) {
		var err error
		if rep, err = verifyLocked(dir, false, nil); err != nil {
			return audit.Head{}, err
		}
		if !rep.OK {
			return audit.Head{}, unavailable("the log's own chain is broken at seq %d (%s), so it cannot be anchored: keep it as evidence and move the audit directory aside to start over", rep.FirstBadSeq, rep.Problem)
		}
		return chainHead(rep), nil
	})
	if err != nil {
		if rep == nil || rep.OK {
			return nil, err
		}
		return rep, err
	}
	sr := &SealReport{Status: SealVerified, KeyID: done.KeyID, HeadSeq: done.Head.Seq, HeadHash: done.Head.Hash, Witness: "none"}
	if done.KeyID == "" {
		sr.Status = SealUnsealed
	}
	if done.Witness {
		sr.WitnessSeq, sr.Witness = done.Head.Seq, "set"
	}
	rep.Seal = sr
	return rep, nil
}

// chainHead is the head of the chain rep verified: 0 and Genesis for no
// records.
func chainHead(rep *Report) audit.Head {
	if rep.Records == 0 {
		return audit.Head{Seq: 0, Hash: audit.Genesis}
	}
	return audit.Head{Seq: rep.LastSeq, Hash: rep.LastHash}
}
