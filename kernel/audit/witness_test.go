package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/keychain"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/test/keychaintest"
)

// witnessHome is anchoredHome with a witness in the real OS keychain under
// a service of its own (run through test/keyring.sh).
func witnessHome(t *testing.T) (dir string, a *Anchor) {
	t.Helper()
	keychaintest.Require(t)
	dir, a = anchoredHome(t, testKey(t))
	a.Witness = "agentnode-audit-witness-test-" + filepath.Base(filepath.Dir(dir))
	t.Cleanup(func() {
		if cdir, err := CanonicalDir(dir); err == nil {
			_ = keychain.Delete(a.Witness, cdir)
		}
	})
	return dir, a
}

// saveFiles keeps the content of files (a backup an attacker can put back
// later).
func saveFiles(t *testing.T, paths ...string) map[string][]byte {
	t.Helper()
	saved := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		saved[p] = data
	}
	return saved
}

func restoreFiles(t *testing.T, saved map[string][]byte) {
	t.Helper()
	for p, data := range saved {
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWitnessDetectsDeletedAnchorAndLog: the first sealed append sets the
// witness; deleting both the log and its anchor then no longer looks like
// a new home, to verify or to the next append.
func TestWitnessDetectsDeletedAnchorAndLog(t *testing.T) {
	dir, a := witnessHome(t)
	appendN(t, openT(t, dir, Options{Anchor: a}), 0, 3)
	cdir, _ := CanonicalDir(dir)
	if w, err := GetWitness(a.Witness, cdir); err != nil || w == nil || w.Seq != 1 {
		t.Fatalf("witness after the first sealed append: %+v, %v", w, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(a.Path); err != nil {
		t.Fatal(err)
	}
	rep := verifyAnchoredT(t, dir, a)
	if rep.OK || rep.Problem != ProblemAnchorMissing || !strings.Contains(rep.Detail, "the anchor was deleted") {
		t.Fatalf("log and anchor deleted: %+v", rep)
	}
	err := openT(t, dir, Options{Anchor: a}).Append(typical(9))
	if !errors.Is(err, reason.ErrAuditUnavailable) || !strings.Contains(err.Error(), "was sealed before") {
		t.Fatalf("append after log and anchor were deleted: %v", err)
	}
	// Starting over on purpose.
	if _, err := Reanchor(dir, a); err != nil {
		t.Fatal(err)
	}
	appendN(t, openT(t, dir, Options{Anchor: a}), 0, 2)
	if rep := verifyAnchoredT(t, dir, a); !rep.OK || rep.LastSeq != 2 {
		t.Fatalf("after starting over: %+v", rep)
	}
}

// TestWitnessDetectsRollback: a verify moves the witness on; putting back
// an older copy of both log and anchor is then caught. A copy newer than
// the last verify is not (specs/audit.md).
func TestWitnessDetectsRollback(t *testing.T) {
	dir, a := witnessHome(t)
	l := openT(t, dir, Options{Anchor: a})
	appendN(t, l, 0, 5)
	if rep := verifyAnchoredT(t, dir, a); !rep.OK || rep.Seal.WitnessSeq != 5 {
		t.Fatalf("verify: %+v %+v", rep, rep.Seal)
	}
	old := saveFiles(t, activePath(dir), a.Path)
	appendN(t, l, 5, 4)
	afterVerify := saveFiles(t, activePath(dir), a.Path)
	appendN(t, l, 9, 1)
	if rep := verifyAnchoredT(t, dir, a); !rep.OK || rep.Seal.WitnessSeq != 10 || rep.Seal.Witness != "checked, moved on" {
		t.Fatalf("verify: %+v %+v", rep, rep.Seal)
	}
	restoreFiles(t, old)
	rep := verifyAnchoredT(t, dir, a)
	if rep.OK || rep.Problem != ProblemRollback || rep.FirstBadSeq != 6 || !strings.Contains(rep.Detail, "put back to an older copy") {
		t.Fatalf("rollback to seq 5: %+v", rep)
	}
	// A copy newer than the first verify but older than the last one is
	// caught too (the witness is at 10); a copy taken after the last verify
	// would not be.
	restoreFiles(t, afterVerify)
	if rep := verifyAnchoredT(t, dir, a); rep.OK || rep.Problem != ProblemRollback {
		t.Fatalf("rollback to seq 9: %+v", rep)
	}
}

// TestWitnessDetectsUnsealedAnchor: replacing the sealed anchor with an
// unsealed one (what a writer without a keychain writes) for a truncated
// log is caught once the log has a witness.
func TestWitnessDetectsUnsealedAnchor(t *testing.T) {
	dir, a := witnessHome(t)
	appendN(t, openT(t, dir, Options{Anchor: a}), 0, 6)
	lines := logLinesT(t, activePath(dir))
	writeLinesT(t, activePath(dir), lines[:4])
	cdir, _ := CanonicalDir(dir)
	h := lastHead(t, lines[:4])
	s0 := &anchorBody{Gen: 100, Version: anchorVersion, Dir: cdir, Head: h}
	s1 := &anchorBody{Gen: 101, Version: anchorVersion, Dir: cdir, Head: h}
	if err := writeAnchorFile(a.Path, nil, s0, s1); err != nil {
		t.Fatal(err)
	}
	rep := verifyAnchoredT(t, dir, a)
	if rep.OK || rep.Problem != ProblemAnchorUnsealed {
		t.Fatalf("unsealed anchor over a sealed log: %+v", rep)
	}
	err := openT(t, dir, Options{Anchor: a}).Append(typical(9))
	if !errors.Is(err, reason.ErrAuditUnavailable) || !strings.Contains(err.Error(), "is not sealed, but this log was sealed before") {
		t.Fatalf("append: %v", err)
	}
}
