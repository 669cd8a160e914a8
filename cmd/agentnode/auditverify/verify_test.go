package auditverify

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/reason"
)

func TestTail(t *testing.T) {
	dir := t.TempDir()
	if recs, err := Tail(filepath.Join(dir, "missing"), 5); err != nil || len(recs) != 0 {
		t.Fatalf("missing log: %v %v", recs, err)
	}
	l := openT(t, dir, audit.Options{MaxSizeBytes: 2048, MaxFiles: 100})
	want := appendN(t, l, 0, 30)
	for _, n := range []int{1, 5, 7, 29, 30, 31, 0, -1} {
		recs, err := Tail(dir, n)
		if err != nil {
			t.Fatal(err)
		}
		exp := n
		if n <= 0 || n > 30 {
			exp = 30
		}
		if len(recs) != exp {
			t.Fatalf("Tail(%d): %d records", n, len(recs))
		}
		for i, r := range recs {
			w := want[30-exp+i]
			if r.Seq != w.Seq || r.Hash != w.Hash || r.RequestID != w.RequestID || !r.TS.Equal(w.TS) ||
				r.Env != w.Env || (r.ExitCode == nil) != (w.ExitCode == nil) {
				t.Fatalf("Tail(%d)[%d] = %+v, want %+v", n, i, r, w)
			}
		}
	}
}

func TestVerifyMissingLog(t *testing.T) {
	rep, err := Verify(filepath.Join(t.TempDir(), "nope"))
	if err != nil || !rep.OK || rep.Records != 0 || rep.Files != 0 {
		t.Fatalf("report %+v %v", rep, err)
	}
}

// An allowed run with no outcome record after its decision is reported
// (a warning, which `audit verify --strict` fails on); denied decisions and
// runs with their outcome are not.
func TestVerifyReportsRunsWithoutOutcome(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, audit.Options{})
	appendN(t, l, 0, 4) // two runs, each a decision and its outcome
	rep, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Unfinished) != 0 || len(rep.Warnings) != 0 {
		t.Fatalf("complete runs: %+v", rep)
	}
	denied := typical(100)
	denied.Decision, denied.Code, denied.Placement = "deny", "policy_denied", "none"
	cut := typical(102) // allowed; its outcome (103) never written
	for _, r := range []*audit.Record{denied, cut} {
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	rep, err = Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Unfinished) != 1 || rep.Unfinished[0].RequestID != cut.RequestID || rep.Unfinished[0].Seq != cut.Seq {
		t.Fatalf("one allowed run without outcome: %+v", rep)
	}
	if len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], cut.RequestID) {
		t.Fatalf("warnings %q", rep.Warnings)
	}
	// Its outcome arrives (the run was still going): nothing to report.
	if err := l.Append(typical(103)); err != nil {
		t.Fatal(err)
	}
	if rep, _ := Verify(dir); !rep.OK || len(rep.Unfinished) != 0 || len(rep.Warnings) != 0 {
		t.Fatalf("after the outcome: %+v", rep)
	}
}

// TestReanchor: an honest log that was cut off is accepted again only on
// purpose; a broken chain is not anchored.
func TestReanchor(t *testing.T) {
	dir, a := anchoredHome(t, testKey(t))
	appendN(t, openT(t, dir, audit.Options{Anchor: a}), 0, 6)
	lines := logLinesT(t, activePath(dir))
	writeLinesT(t, activePath(dir), lines[:4])
	if rep := verifyAnchoredT(t, dir, a); rep.OK {
		t.Fatal("truncation not detected")
	}
	rep, err := Reanchor(dir, a)
	if err != nil || rep.Seal.HeadSeq != 4 || rep.Seal.Status != SealVerified {
		t.Fatalf("Reanchor: %+v, %v", rep, err)
	}
	if rep := verifyAnchoredT(t, dir, a); !rep.OK {
		t.Fatalf("after reanchor: %+v", rep)
	}
	appendN(t, openT(t, dir, audit.Options{Anchor: a}), 10, 2)
	if rep := verifyAnchoredT(t, dir, a); !rep.OK || rep.LastSeq != 6 {
		t.Fatalf("appends after reanchor: %+v", rep)
	}
	lines = logLinesT(t, activePath(dir))
	lines[1] = bytes.Replace(lines[1], []byte(`"tool":"read_file"`), []byte(`"tool":"rm_rf____"`), 1)
	writeLinesT(t, activePath(dir), lines)
	if _, err := Reanchor(dir, a); !errors.Is(err, reason.ErrAuditUnavailable) || !strings.Contains(err.Error(), "chain is broken at seq 2") {
		t.Fatalf("Reanchor of a broken chain: %v", err)
	}
}

func benchVerify(b *testing.B, n int, full bool) {
	dir := b.TempDir()
	writeChain(b, dir, n)
	st, _ := os.Stat(filepath.Join(dir, audit.FileName))
	b.SetBytes(st.Size())
	b.ResetTimer()
	start := time.Now()
	iters := 0
	for b.Loop() {
		rep, err := verify(dir, full)
		if err != nil || !rep.OK || rep.Records != n {
			b.Fatalf("report %+v %v", rep, err)
		}
		iters++
	}
	b.ReportMetric(float64(n*iters)/time.Since(start).Seconds(), "records/s")
}

// BenchmarkVerify verifies a 100,000-record log (about 50 MB).
func BenchmarkVerify(b *testing.B) { benchVerify(b, 100_000, false) }

// BenchmarkVerifyFullSchema runs the JSON Schema validator on every record
// too, to show why Verify does not.
func BenchmarkVerifyFullSchema(b *testing.B) { benchVerify(b, 10_000, true) }

// writeChain writes n valid records to dir without syncing (fast setup):
// one record appended by the kernel's Log, repeated with each copy's seq,
// prev and hash set by the kernel's hash rule (audit.LineHasher).
func writeChain(b *testing.B, dir string, n int) {
	tmpl := dir + ".tmpl"
	l, err := audit.Open(tmpl, audit.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Append(typical(0)); err != nil {
		b.Fatal(err)
	}
	_ = l.Close()
	data, err := os.ReadFile(filepath.Join(tmpl, audit.FileName))
	if err != nil {
		b.Fatal(err)
	}
	// {"seq":1,<middle>"prev":"<64>","hash":"<64>"}
	line := bytes.TrimSuffix(data, []byte("\n"))
	middle := line[len(`{"seq":1,`) : len(line)-len(`"prev":"`)-64-len(`","hash":"`)-64-len(`"}`)]
	f, err := os.OpenFile(filepath.Join(dir, audit.FileName), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	h := audit.NewLineHasher()
	var hx [64]byte
	prev := []byte(audit.Genesis)
	var buf []byte
	for i := range n {
		buf = append(buf[:0], `{"seq":`...)
		buf = strconv.AppendUint(buf, uint64(i+1), 10)
		buf = append(buf, ',')
		buf = append(buf, middle...)
		buf = append(append(buf, `"prev":"`...), prev...)
		buf = append(append(buf, `","hash":"`...), strings.Repeat("0", 64)...)
		buf = append(buf, `"}`...)
		h.Sum(buf, &hx)
		copy(buf[len(buf)-66:], hx[:])
		prev = append(prev[:0], hx[:]...)
		if _, err := w.Write(append(buf, '\n')); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}
