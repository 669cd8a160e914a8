package audit

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agentnode/agentnode/kernel/keychain"
	"github.com/agentnode/agentnode/kernel/lockfile"
	"github.com/agentnode/agentnode/kernel/reason"
)

// testKey is a seal key for tests that do not need the OS keychain (the
// keychain tests below use it with a real witness).
func testKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, lockfile.KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// anchoredHome is a home-like layout: home/audit (the log) and
// home/state/audit.anchor, sealed with key, without a witness.
func anchoredHome(t testing.TB, key []byte) (dir string, a *Anchor) {
	t.Helper()
	h := t.TempDir()
	return filepath.Join(h, "audit"), &Anchor{
		Path: filepath.Join(h, "state", "audit.anchor"),
		Key:  func(string) ([]byte, error) { return key, nil },
	}
}

func verifyAnchoredT(t testing.TB, dir string, a *Anchor) *Report {
	t.Helper()
	rep, err := VerifyAnchored(dir, a)
	if err != nil {
		t.Fatalf("VerifyAnchored: %v", err)
	}
	return rep
}

// logLinesT returns the lines of a log file, each with its newline.
func logLinesT(t testing.TB, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("%s does not end in a newline", path)
	}
	return bytes.SplitAfter(data, []byte("\n"))[:bytes.Count(data, []byte("\n"))]
}

var prevMember = regexp.MustCompile(`"prev":"[0-9a-f]{64}"`)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func killSelf() error { return syscall.Kill(os.Getpid(), syscall.SIGKILL) }

// rechain returns the log's lines with record seq `from` edited and every
// record from it on re-chained (prev and hash recomputed): a rewrite that
// the bare chain cannot tell from the original.
func rechain(t testing.TB, lines [][]byte, from int) [][]byte {
	t.Helper()
	out := slices.Clone(lines)
	out[from-1] = bytes.Replace(out[from-1], []byte(`"decision":"deny"`), []byte(`"decision":"allow"`), 1)
	out[from-1] = bytes.Replace(out[from-1], []byte(`"decision":"allow","code":"policy_denied"`), []byte(`"decision":"allow","code":""`), 1)
	prev := ""
	for i := from - 1; i < len(out); i++ {
		if prev != "" {
			out[i] = prevMember.ReplaceAll(out[i], []byte(`"prev":"`+prev+`"`))
		}
		out[i] = reseal(t, out[i])
		prev, _ = independentHash(t, out[i])
	}
	return out
}

// forgedNext is a record that continues lines correctly: seq one more,
// prev the last hash, its own hash right.
func forgedNext(t testing.TB, lines [][]byte) []byte {
	t.Helper()
	last := lines[len(lines)-1]
	li, err := parseLine(last[:len(last)-1])
	if err != nil {
		t.Fatal(err)
	}
	r := typical(99)
	r.Seq, r.Prev, r.Reason = li.Seq+1, string(li.Hash), "forged: everything was fine"
	line, _ := seal(appendBody(nil, r))
	return line
}

// TestAnchorDetectsTampering: the four tamper cases a bare hash chain
// cannot see (truncation, re-chaining, a forged append, an emptied or
// deleted log), and tampering with the anchor itself, each named by
// VerifyAnchored; the bare Verify passes on each of the log changes, which
// shows they are the anchor's catch.
func TestAnchorDetectsTampering(t *testing.T) {
	cases := []struct {
		name    string
		tamper  func(t *testing.T, dir string, a *Anchor, lines [][]byte)
		chainOK bool // the bare chain still verifies
		problem string
		seq     uint64
		detail  string
	}{
		{
			name: "truncate the last three records",
			tamper: func(t *testing.T, dir string, _ *Anchor, lines [][]byte) {
				writeLinesT(t, activePath(dir), lines[:7])
			},
			chainOK: true, problem: ProblemAnchorMismatch, seq: 8, detail: "records 8..10 were cut off",
		},
		{
			name: "truncate the last record",
			tamper: func(t *testing.T, dir string, _ *Anchor, lines [][]byte) {
				writeLinesT(t, activePath(dir), lines[:9])
			},
			chainOK: true, problem: ProblemAnchorMismatch, seq: 10, detail: "records 10..10 were cut off",
		},
		{
			name: "rewrite a record and re-chain the rest",
			tamper: func(t *testing.T, dir string, _ *Anchor, lines [][]byte) {
				writeLinesT(t, activePath(dir), rechain(t, lines, 5))
			},
			chainOK: true, problem: ProblemAnchorMismatch, seq: 10, detail: "rewritten and their hashes recomputed",
		},
		{
			name: "append a forged record with a correct chain hash",
			tamper: func(t *testing.T, dir string, _ *Anchor, lines [][]byte) {
				writeLinesT(t, activePath(dir), append(lines, forgedNext(t, lines)))
			},
			chainOK: true, problem: ProblemAnchorMismatch, seq: 11, detail: "not written by agentnode",
		},
		{
			name: "truncate and append a forged record in its place",
			tamper: func(t *testing.T, dir string, _ *Anchor, lines [][]byte) {
				writeLinesT(t, activePath(dir), append(lines[:9:9], forgedNext(t, lines[:9])))
			},
			chainOK: true, problem: ProblemAnchorMismatch, seq: 10, detail: "rewritten",
		},
		{
			name: "empty the log",
			tamper: func(t *testing.T, dir string, _ *Anchor, _ [][]byte) {
				writeLinesT(t, activePath(dir), nil)
			},
			chainOK: true, problem: ProblemAnchorMismatch, seq: 1, detail: "emptied or deleted",
		},
		{
			name: "delete the log file",
			tamper: func(t *testing.T, dir string, _ *Anchor, _ [][]byte) {
				if err := os.Remove(activePath(dir)); err != nil {
					t.Fatal(err)
				}
			},
			chainOK: true, problem: ProblemAnchorMismatch, seq: 1, detail: "emptied or deleted",
		},
		{
			name: "delete the audit directory",
			tamper: func(t *testing.T, dir string, _ *Anchor, _ [][]byte) {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
			},
			chainOK: true, problem: ProblemAnchorMismatch, seq: 1, detail: "emptied or deleted",
		},
		{
			name: "truncate and edit the anchor to match",
			tamper: func(t *testing.T, dir string, a *Anchor, lines [][]byte) {
				writeLinesT(t, activePath(dir), lines[:7])
				h := lastHead(t, lines[:7])
				editSlots(t, a.Path, func(_ int, b *anchorBody) { b.Head, b.Pending = h, nil })
			},
			chainOK: true, problem: ProblemAnchorInvalid, seq: 8, detail: "changed after it was sealed",
		},
		{
			name: "truncate and seal the anchor with another key",
			tamper: func(t *testing.T, dir string, a *Anchor, lines [][]byte) {
				writeLinesT(t, activePath(dir), lines[:7])
				st := readAnchorT(t, a.Path)
				s0, s1 := st.slots[0].anchorBody, st.slots[1].anchorBody
				s0.Head, s0.Pending, s1.Head, s1.Pending = lastHead(t, lines[:7]), nil, lastHead(t, lines[:7]), nil
				if err := writeAnchorFile(a.Path, testKey(t), &s0, &s1); err != nil {
					t.Fatal(err)
				}
			},
			chainOK: true, problem: ProblemAnchorInvalid, seq: 8, detail: "sealed with another key",
		},
		{
			name: "corrupt the anchor",
			tamper: func(t *testing.T, _ string, a *Anchor, _ [][]byte) {
				writeAnchorT(t, a.Path, []byte(`{"version":1}`))
			},
			chainOK: true, problem: ProblemAnchorInvalid, seq: 11, detail: "not an anchor file",
		},
		{
			name: "an anchor of the earlier format",
			tamper: func(t *testing.T, _ string, a *Anchor, _ [][]byte) {
				writeAnchorT(t, a.Path, []byte(`{"version":1,"dir":"/x","head":{"seq":0,"hash":"`+Genesis+`"},"seal":null}`+"\n"))
			},
			chainOK: true, problem: ProblemAnchorInvalid, seq: 11, detail: "earlier one-object format",
		},
		{
			name: "tear both slots",
			tamper: func(t *testing.T, _ string, a *Anchor, _ [][]byte) {
				tearSlot(t, a.Path, 0)
				tearSlot(t, a.Path, 1)
			},
			chainOK: true, problem: ProblemAnchorInvalid, seq: 11, detail: "neither of its two slots is intact",
		},
		{
			// At rest the newest slot is the commit of seq 10 and the
			// other the intent that named seq 10 as pending: torn, the
			// commit leaves the intent, which then admits only seq 10.
			name: "tear the newest slot and cut off the last record",
			tamper: func(t *testing.T, dir string, a *Anchor, lines [][]byte) {
				tearSlot(t, a.Path, readAnchorT(t, a.Path).cur)
				writeLinesT(t, activePath(dir), lines[:9])
			},
			chainOK: true, problem: ProblemAnchorMismatch, seq: 10, detail: "records 10..10 were cut off",
		},
		{
			name: "tear the older slot and cut off the last record",
			tamper: func(t *testing.T, dir string, a *Anchor, lines [][]byte) {
				tearSlot(t, a.Path, 1-readAnchorT(t, a.Path).cur)
				writeLinesT(t, activePath(dir), lines[:9])
			},
			chainOK: true, problem: ProblemAnchorMismatch, seq: 10, detail: "records 10..10 were cut off",
		},
		{
			// Making the intent the newest slot would reopen the crash
			// window (log at seq 9 or 10): the generation is sealed.
			name: "raise the intent's generation and cut off the last record",
			tamper: func(t *testing.T, dir string, a *Anchor, lines [][]byte) {
				cur := readAnchorT(t, a.Path).cur
				editSlots(t, a.Path, func(i int, b *anchorBody) {
					if i != cur {
						b.Gen += 2
					}
				})
				writeLinesT(t, activePath(dir), lines[:9])
			},
			chainOK: true, problem: ProblemAnchorInvalid, seq: 10, detail: "changed after it was sealed",
		},
		{
			name: "an edited record still breaks the chain first",
			tamper: func(t *testing.T, dir string, _ *Anchor, lines [][]byte) {
				lines[4] = bytes.Replace(lines[4], []byte(`"decision":"deny"`), []byte(`"decision":"allow"`), 1)
				writeLinesT(t, activePath(dir), lines)
			},
			chainOK: false, problem: ProblemHashMismatch, seq: 5, detail: "changed after it was written",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := testKey(t)
			dir, a := anchoredHome(t, key)
			l := openT(t, dir, Options{Anchor: a})
			appendN(t, l, 0, 10)
			rep := verifyAnchoredT(t, dir, a)
			if !rep.OK || rep.Seal.Status != SealVerified || rep.Seal.HeadSeq != 10 || len(rep.Warnings) > 0 {
				t.Fatalf("honest log (the control): %+v %+v", rep, rep.Seal)
			}
			c.tamper(t, dir, a, logLinesT(t, activePath(dir)))
			if bare, err := Verify(dir); err != nil || bare.OK != c.chainOK {
				t.Fatalf("bare Verify: ok=%v, want %v (%+v, %v)", bare.OK, c.chainOK, bare, err)
			}
			rep = verifyAnchoredT(t, dir, a)
			if rep.OK || rep.Problem != c.problem || rep.FirstBadSeq != c.seq || !strings.Contains(rep.Detail, c.detail) {
				t.Fatalf("got ok=%v %s at seq %d: %s\nwant %s at seq %d: …%s…", rep.OK, rep.Problem, rep.FirstBadSeq, rep.Detail, c.problem, c.seq, c.detail)
			}
			// The writer will not go on from a tampered log either.
			if c.problem != ProblemHashMismatch {
				err := l.Append(typical(50))
				if !errors.Is(err, reason.ErrAuditUnavailable) {
					t.Fatalf("Append after tampering: %v, want audit_unavailable", err)
				}
			}
		})
	}
}

func lastHead(t testing.TB, lines [][]byte) Head {
	t.Helper()
	last := lines[len(lines)-1]
	li, err := parseLine(last[:len(last)-1])
	if err != nil {
		t.Fatal(err)
	}
	return Head{li.Seq, string(li.Hash)}
}

func readAnchorT(t testing.TB, path string) *AnchorState {
	t.Helper()
	st, err := ReadAnchor(path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func writeAnchorT(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// editSlots changes the body of each intact slot, keeps its old seal and
// recomputes its checksum, as an attacker who knows the format does.
func editSlots(t testing.TB, path string, edit func(i int, b *anchorBody)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st := readAnchorT(t, path)
	for i, sl := range st.slots {
		if sl == nil {
			continue
		}
		edit(i, &sl.anchorBody)
		text, err := jsonMarshal(sl)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(text)
		slot := append(text[:len(text)-1:len(text)-1], []byte(`,"sum":"`+hex.EncodeToString(sum[:])+`"}`)...)
		slot = append(slot, bytes.Repeat([]byte(" "), anchorSlotSize-1-len(slot))...)
		copy(data[i*anchorSlotSize:], append(slot, '\n'))
	}
	writeAnchorT(t, path, data)
}

// tearSlot overwrites the start of slot i with zeros: what a write torn
// by a crash can leave (and what an attacker can do).
func tearSlot(t testing.TB, path string, i int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 512), int64(i*anchorSlotSize)); err != nil {
		t.Fatal(err)
	}
}

// TestAnchorCopiedFromAnotherLog: a log and its anchor from another home
// sealed with the same key do not pass for this one.
func TestAnchorCopiedFromAnotherLog(t *testing.T) {
	key := testKey(t)
	dir1, a1 := anchoredHome(t, key)
	dir2, a2 := anchoredHome(t, key)
	appendN(t, openT(t, dir1, Options{Anchor: a1}), 0, 3)
	appendN(t, openT(t, dir2, Options{Anchor: a2}), 0, 5)
	data, err := os.ReadFile(activePath(dir1))
	if err != nil {
		t.Fatal(err)
	}
	writeLinesT(t, activePath(dir2), [][]byte{data})
	anchor, err := os.ReadFile(a1.Path)
	if err != nil {
		t.Fatal(err)
	}
	writeAnchorT(t, a2.Path, anchor)
	rep := verifyAnchoredT(t, dir2, a2)
	if rep.OK || rep.Problem != ProblemAnchorInvalid || !strings.Contains(rep.Detail, "belongs to the log in") {
		t.Fatalf("%+v", rep)
	}
}

// TestAnchorWithoutKeychain: without an OS keychain the anchor is written
// unsealed and verify warns; once sealed, an append without the key is
// refused before anything is written; and a sealed anchor cannot be
// checked without the key (a warning, and the unauthenticated comparison
// still runs).
func TestAnchorWithoutKeychain(t *testing.T) {
	noKeychain := func(string) ([]byte, error) {
		return nil, fmt.Errorf("read seal key: %w", keychain.ErrUnavailable)
	}
	h := t.TempDir()
	dir := filepath.Join(h, "audit")
	a := &Anchor{Path: filepath.Join(h, "state", "audit.anchor"), Key: noKeychain}
	l := openT(t, dir, Options{Anchor: a})
	appendN(t, l, 0, 4)
	if f := readAnchorT(t, a.Path).newest(); f.Seal != nil || f.Head.Seq != 4 {
		t.Fatalf("anchor without a keychain: %+v", f)
	}
	rep := verifyAnchoredT(t, dir, a)
	if !rep.OK || rep.Seal.Status != SealUnsealed || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "not sealed") {
		t.Fatalf("unsealed: %+v %+v", rep, rep.Seal)
	}
	// An unsealed anchor still catches a truncation that left it alone.
	lines := logLinesT(t, activePath(dir))
	writeLinesT(t, activePath(dir), lines[:3])
	if rep := verifyAnchoredT(t, dir, a); rep.OK || rep.Problem != ProblemAnchorMismatch {
		t.Fatalf("truncated, unsealed anchor: %+v", rep)
	}
	writeLinesT(t, activePath(dir), lines)

	// The keychain appears: the next append seals the anchor.
	key := testKey(t)
	a.Key = func(string) ([]byte, error) { return key, nil }
	l2 := openT(t, dir, Options{Anchor: a})
	appendN(t, l2, 4, 1)
	st := readAnchorT(t, a.Path)
	for _, f := range st.slots {
		if f == nil || f.Seal == nil || f.Seal.KeyID != lockfile.KeyID(key) {
			t.Fatalf("anchor not sealed (both slots) once the key is there: %+v", f)
		}
	}
	// The keychain goes away again: sealed stays sealed, the append is refused.
	size := fileSize(t, activePath(dir))
	a.Key = noKeychain
	l3 := openT(t, dir, Options{Anchor: a})
	err := l3.Append(typical(5))
	if !errors.Is(err, reason.ErrAuditUnavailable) || !strings.Contains(err.Error(), "is sealed, but the seal key cannot be read") {
		t.Fatalf("append without the key to a sealed anchor: %v", err)
	}
	if fileSize(t, activePath(dir)) != size {
		t.Fatal("the refused append wrote to the log")
	}
	rep = verifyAnchoredT(t, dir, a)
	if !rep.OK || rep.Seal.Status != SealUnverifiable || len(rep.Warnings) != 1 {
		t.Fatalf("sealed anchor without the key: %+v %+v", rep, rep.Seal)
	}
	// A keychain that is there but fails otherwise (locked, a bad key):
	// refused even for an unsealed anchor.
	if err := os.Remove(a.Path); err != nil {
		t.Fatal(err)
	}
	a.Key = func(string) ([]byte, error) { return nil, errors.New("the keyring is locked") }
	l4 := openT(t, dir, Options{Anchor: a})
	if err := l4.Append(typical(6)); !errors.Is(err, reason.ErrAuditUnavailable) || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("append with a failing keychain: %v", err)
	}
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestAnchorRotation: the anchor follows the head across rotated files,
// and a truncation of the active file after a rotation is still caught.
func TestAnchorRotation(t *testing.T) {
	dir, a := anchoredHome(t, testKey(t))
	l := openT(t, dir, Options{Anchor: a, MaxSizeBytes: 2048, MaxFiles: 3})
	appendN(t, l, 0, 40)
	rep := verifyAnchoredT(t, dir, a)
	if !rep.OK || rep.Files != 3 || rep.FirstSeq == 1 || rep.Seal.HeadSeq != 40 {
		t.Fatalf("%+v %+v", rep, rep.Seal)
	}
	writeLinesT(t, activePath(dir), nil)
	if rep := verifyAnchoredT(t, dir, a); rep.OK || rep.Problem != ProblemAnchorMismatch || !strings.Contains(rep.Detail, "were cut off") {
		t.Fatalf("emptied active file: %+v", rep)
	}
}

// TestAnchorCrash kills a real appending process at each point of an
// append: after the intent is durable, after the record is, and in the
// middle of writing the intent's or the commit's slot (half of it written:
// a torn slot). Each time the log must verify, the anchor must leave no
// slack beyond the one record an intent named (and none at all with a torn
// slot), and the next append must go on.
func TestAnchorCrash(t *testing.T) {
	cases := []struct {
		name    string
		crashes []string // AUDIT_CRASH or tear:AUDIT_TEAR of each child, in turn
		last    uint64   // where the log ends after the crash
		pending bool     // at the intent's pending record
		torn    bool     // one slot torn
	}{
		{name: "intent", crashes: []string{"intent"}, last: 5},
		{name: "record", crashes: []string{"record"}, last: 6, pending: true},
		{name: "torn intent", crashes: []string{"tear:intent"}, last: 5, torn: true},
		{name: "torn commit", crashes: []string{"tear:commit"}, last: 6, torn: true},
		// The second append first commits the log's end (the first one's
		// record never came), so that its torn intent leaves that commit,
		// not the stale intent naming seq 6.
		{name: "intent then torn intent", crashes: []string{"intent", "tear:intent"}, last: 5, torn: true},
		{name: "record then torn intent", crashes: []string{"record", "tear:intent"}, last: 6, torn: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := testKey(t)
			dir, a := anchoredHome(t, key)
			appendN(t, openT(t, dir, Options{Anchor: a}), 0, 5)
			for _, crash := range c.crashes {
				env := []string{"AUDIT_DIR=" + dir, "AUDIT_ANCHOR=" + a.Path, "AUDIT_KEY=" + hex.EncodeToString(key)}
				want := "dying at " + crash
				if what, ok := strings.CutPrefix(crash, "tear:"); ok {
					env, want = append(env, "AUDIT_TEAR="+what), "tearing "+what
				} else {
					env = append(env, "AUDIT_CRASH="+crash)
				}
				out, err := child(t, "crash", env...).CombinedOutput()
				if err == nil || !strings.Contains(string(out), want) {
					t.Fatalf("child did not die (%s): %v\n%s", want, err, out)
				}
			}
			st := readAnchorT(t, a.Path)
			if st.Torn() != c.torn {
				t.Fatalf("anchor after the crash: torn %v, want %v", st.Torn(), c.torn)
			}
			lines := logLinesT(t, activePath(dir))
			rep := verifyAnchoredT(t, dir, a)
			if !rep.OK || rep.LastSeq != c.last || rep.Seal.Pending != c.pending || rep.Seal.Torn != c.torn {
				t.Fatalf("after the crash: %+v %+v", rep, rep.Seal)
			}
			// The slack: only with an intent as the anchor, and only the
			// pending record, may the log end one record earlier; any other
			// record in its place, or any other cut, is caught.
			cut := lines[:len(lines)-1]
			writeLinesT(t, activePath(dir), cut)
			if rep := verifyAnchoredT(t, dir, a); rep.OK != c.pending || !rep.OK && rep.Problem != ProblemAnchorMismatch {
				t.Fatalf("last record (seq %d) cut off: ok=%v, want %v: %+v", c.last, rep.OK, c.pending, rep)
			}
			writeLinesT(t, activePath(dir), append(cut[:len(cut):len(cut)], forgedNext(t, cut)))
			if rep := verifyAnchoredT(t, dir, a); rep.OK || rep.Problem != ProblemAnchorMismatch {
				t.Fatalf("another record in the last one's place: %+v", rep)
			}
			writeLinesT(t, activePath(dir), append(lines[:len(lines):len(lines)], forgedNext(t, lines)))
			if rep := verifyAnchoredT(t, dir, a); rep.OK || rep.Problem != ProblemAnchorMismatch {
				t.Fatalf("a record appended: %+v", rep)
			}
			writeLinesT(t, activePath(dir), lines)
			appendN(t, openT(t, dir, Options{Anchor: a}), 20, 2)
			rep = verifyAnchoredT(t, dir, a)
			if !rep.OK || rep.LastSeq != c.last+2 || rep.Seal.Pending || rep.Seal.Torn || readAnchorT(t, a.Path).newest().Pending != nil {
				t.Fatalf("after the next appends: %+v %+v", rep, rep.Seal)
			}
		})
	}
}

// childCrash appends one record to AUDIT_DIR, anchored at AUDIT_ANCHOR with
// the hex key AUDIT_KEY, and dies (SIGKILL) at AUDIT_CRASH, or in the
// middle of the anchor's slot write AUDIT_TEAR ("intent", "commit"): the
// first half of the slot's JSON written and synced, the rest left as it
// was.
func childCrash() int {
	key, err := hex.DecodeString(os.Getenv("AUDIT_KEY"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	a := &Anchor{Path: os.Getenv("AUDIT_ANCHOR"), Key: func(string) ([]byte, error) { return key, nil }}
	crashPoint = func(p string) {
		if p == os.Getenv("AUDIT_CRASH") {
			fmt.Fprintln(os.Stderr, "dying at", p)
			_ = killSelf()
		}
	}
	beforeSlotWrite = func(what string, f *os.File, off int64, slot []byte) {
		if what != os.Getenv("AUDIT_TEAR") {
			return
		}
		fmt.Fprintln(os.Stderr, "tearing", what)
		if _, err := f.WriteAt(slot[:len(bytes.TrimRight(slot, " \n"))/2], off); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := f.Sync(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		_ = killSelf()
	}
	l, err := Open(os.Getenv("AUDIT_DIR"), Options{Anchor: a})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := l.Append(typical(7)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0 // not reached: the crash point kills the process
}

// TestConcurrentProcessesKeepAnchor: several processes appending at once
// leave an anchor that names the head.
func TestConcurrentProcessesKeepAnchor(t *testing.T) {
	key := testKey(t)
	dir, a := anchoredHome(t, key)
	const procs, each = 3, 30
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for p := range procs {
		cmd := child(t, "append", "AUDIT_DIR="+dir, fmt.Sprintf("AUDIT_ID=p%d", p), fmt.Sprintf("AUDIT_N=%d", each),
			"AUDIT_MAX_SIZE=8192", "AUDIT_ANCHOR="+a.Path, "AUDIT_KEY="+hex.EncodeToString(key))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
	}
	rep := verifyAnchoredT(t, dir, a)
	if !rep.OK || rep.LastSeq != procs*each || rep.Seal.Status != SealVerified || rep.Seal.HeadSeq != procs*each || rep.Seal.Pending {
		t.Fatalf("%+v %+v", rep, rep.Seal)
	}
}
