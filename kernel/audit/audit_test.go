package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/kernel/reason"
)

func TestAppendWritesHashChain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	l := openT(t, dir, Options{})
	before := time.Now().UTC()
	recs := appendN(t, l, 0, 6)

	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Errorf("record %d: Seq = %d", i, r.Seq)
		}
		if r.TS.Before(before.Add(-time.Second)) || r.TS.Location() != time.UTC {
			t.Errorf("record %d: TS = %v", i, r.TS)
		}
	}
	if recs[0].Prev != Genesis {
		t.Fatalf("first prev = %q, want 64 zeros", recs[0].Prev)
	}

	lines := readLinesT(t, activePath(dir))
	if len(lines) != 6 {
		t.Fatalf("%d lines, want 6", len(lines))
	}
	prev := Genesis
	for i, line := range lines {
		if err := validateSchema(bytes.TrimSuffix(line, []byte("\n"))); err != nil {
			t.Errorf("line %d not valid against the schema: %v", i+1, err)
		}
		stored, computed := independentHash(t, line)
		if stored != computed || stored != recs[i].Hash {
			t.Errorf("line %d: stored %s computed %s returned %s", i+1, stored, computed, recs[i].Hash)
		}
		var got map[string]any
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatal(err)
		}
		if got["prev"] != prev {
			t.Errorf("line %d: prev %v, want %s", i+1, got["prev"], prev)
		}
		prev = stored
		_, hasExit := got["exit_code"]
		_, hasDur := got["duration_ms"]
		if want := recs[i].ExitCode != nil; hasExit != want || hasDur != want {
			t.Errorf("line %d: exit_code present %v, duration_ms present %v, want %v", i+1, hasExit, hasDur, want)
		}
		for _, k := range []string{"input", "output", "result"} {
			if _, ok := got[k]; ok {
				t.Errorf("line %d has a %q member", i+1, k)
			}
		}
	}

	// Permissions: dir 0700, files 0600.
	for path, want := range map[string]os.FileMode{dir: 0o700, activePath(dir): 0o600, filepath.Join(dir, LockName): 0o600} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", path, st.Mode().Perm(), want)
		}
	}

	rep, err := verify(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Records != 6 || rep.Files != 1 || rep.FirstSeq != 1 || rep.LastSeq != 6 || rep.LastHash != recs[5].Hash || rep.Anchor != "" {
		t.Fatalf("report %+v", rep)
	}
}

func TestCanonicalMatchesEncodingJSON(t *testing.T) {
	// The canonical serialization is encoding/json's, without HTML escaping
	// and without the hash member (specs/audit.md).
	type noHash struct {
		Seq        uint64    `json:"seq"`
		TS         time.Time `json:"ts"`
		Event      string    `json:"event"`
		RequestID  string    `json:"request_id"`
		Package    string    `json:"package"`
		Version    string    `json:"version"`
		Tool       string    `json:"tool"`
		Action     string    `json:"action"`
		Trust      string    `json:"trust"`
		Placement  string    `json:"placement"`
		Backend    string    `json:"backend"`
		Decision   string    `json:"decision"`
		Code       string    `json:"code"`
		Reason     string    `json:"reason"`
		GuardChain []string  `json:"guard_chain"`
		Env        Env       `json:"env"`
		Workspace  string    `json:"workspace,omitempty"`
		Runtime    string    `json:"runtime,omitempty"`
		ExitCode   *int      `json:"exit_code,omitempty"`
		DurationMS *int64    `json:"duration_ms,omitempty"`
		Prev       string    `json:"prev"`
	}
	weird := []string{
		"", "plain", `quote " and \ backslash`, "tab\tnl\ncr\rbs\bff\f", "ctl\x00\x01\x1f\x7f",
		"<html>&amp;", "line\u2028sep\u2029", "bad utf8 \xff\xfe end", "emoji 🦀 ü", "trunc \xe2\x82",
	}
	for i, s := range weird {
		r := typical(i)
		r.Seq = uint64(i + 1)
		r.TS = time.Date(2026, 1, 2, 3, 4, 5, i*100_000_000, time.UTC)
		r.Prev = Genesis
		r.Reason, r.Backend = s, s
		r.GuardChain = []string{s, "x"}
		if i%2 == 1 { // the optional members, present and absent
			r.Workspace, r.Runtime = s, "gvisor"
		}
		got := appendBody(nil, r)

		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		nh := noHash{r.Seq, r.TS, r.Event, r.RequestID, r.Package, r.Version, r.Tool, r.Action, r.Trust,
			r.Placement, r.Backend, r.Decision, r.Code, r.Reason, r.GuardChain, r.Env, r.Workspace, r.Runtime, r.ExitCode, r.DurationMS, r.Prev}
		if err := enc.Encode(nh); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if !bytes.Equal(got, want) {
			t.Errorf("case %d:\n got %s\nwant %s", i, got, want)
		}
		line, _ := seal(got)
		if _, ok := scanCanonical(line[:len(line)-1]); !ok {
			t.Errorf("case %d: the scanner rejects the writer's line %s", i, line)
		}
	}
	// A nil guard chain is written as [].
	r := typical(0)
	r.GuardChain = nil
	r.Prev = Genesis
	r.TS = time.Unix(0, 0)
	if b := appendBody(nil, r); !bytes.Contains(b, []byte(`"guard_chain":[]`)) || !bytes.Contains(b, []byte(`"ts":"1970-01-01T00:00:00Z"`)) {
		t.Errorf("body %s", b)
	}
}

func TestRotationKeepsChainAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MaxSizeBytes: 2048, MaxFiles: 100}
	l := openT(t, dir, opts)
	recs := appendN(t, l, 0, 40)

	files, err := ListFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("only %d files after 40 records of ~500 bytes with MaxSizeBytes 2048", len(files))
	}
	prevLast := Genesis
	var seq uint64
	for _, f := range files {
		path := filepath.Join(dir, f.Name)
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > opts.MaxSizeBytes {
			t.Errorf("%s is %d bytes > %d", f.Name, st.Size(), opts.MaxSizeBytes)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", f.Name, st.Mode().Perm())
		}
		lines := readLinesT(t, path)
		var first Record
		if err := json.Unmarshal(lines[0], &first); err != nil {
			t.Fatal(err)
		}
		if first.Prev != prevLast {
			t.Errorf("%s: first prev %s is not the last hash %s of the previous file", f.Name, first.Prev, prevLast)
		}
		if first.Seq != seq+1 {
			t.Errorf("%s starts at seq %d, want %d", f.Name, first.Seq, seq+1)
		}
		seq += uint64(len(lines))
		prevLast, _ = independentHash(t, lines[len(lines)-1])
	}
	if seq != 40 || prevLast != recs[39].Hash {
		t.Fatalf("files hold %d records ending in %s", seq, prevLast)
	}
	rep, err := verify(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Records != 40 || rep.Files != len(files) || rep.Anchor != "" {
		t.Fatalf("report %+v", rep)
	}

	// Another Log (another process, say) continues the chain in the new file.
	l2 := openT(t, dir, opts)
	more := appendN(t, l2, 40, 3)
	if more[0].Seq != 41 || more[0].Prev != recs[39].Hash {
		t.Fatalf("second Log continued at seq %d prev %s", more[0].Seq, more[0].Prev)
	}
	if rep, _ := Verify(dir); !rep.OK || rep.Records != 43 {
		t.Fatalf("report %+v", rep)
	}
}

func TestRotationDropsOldFilesAndAnchors(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{MaxSizeBytes: 2048, MaxFiles: 3})
	recs := appendN(t, l, 0, 40)
	files, err := ListFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if strings.Join(names, " ") != "audit.jsonl.2 audit.jsonl.1 audit.jsonl" {
		t.Fatalf("files %v, want .2 .1 and the active one", names)
	}
	first := readLinesT(t, filepath.Join(dir, "audit.jsonl.2"))[0]
	var r Record
	if err := json.Unmarshal(first, &r); err != nil {
		t.Fatal(err)
	}
	rep, err := verify(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Files != 3 || rep.FirstSeq != r.Seq || r.Seq <= 1 || rep.Anchor != r.Prev ||
		rep.LastSeq != 40 || rep.LastHash != recs[39].Hash || rep.Records != int(40-r.Seq+1) {
		t.Fatalf("report %+v (oldest kept record seq %d prev %s)", rep, r.Seq, r.Prev)
	}
	// MaxFiles below 2 is raised to 2: the newest rotated file stays.
	l1 := openT(t, dir, Options{MaxSizeBytes: 2048, MaxFiles: 1})
	appendN(t, l1, 40, 10)
	if files, _ := ListFiles(dir); len(files) != 2 {
		t.Fatalf("%d files with MaxFiles 1", len(files))
	}
	if rep, _ := Verify(dir); !rep.OK || rep.LastSeq != 50 {
		t.Fatalf("report %+v", rep)
	}
}

func TestTwoLogsInOneProcessShareTheChain(t *testing.T) {
	dir := t.TempDir()
	a, b := openT(t, dir, Options{}), openT(t, dir, Options{})
	var got []uint64
	for i := range 6 {
		l := a
		if i%3 == 1 {
			l = b
		}
		r := typical(i)
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Seq)
	}
	for i, s := range got {
		if s != uint64(i+1) {
			t.Fatalf("seqs %v", got)
		}
	}
	if rep, _ := Verify(dir); !rep.OK || rep.Records != 6 {
		t.Fatalf("report %+v", rep)
	}
}

func TestReasonCappedAndNilGuardChain(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{})
	r := typical(0)
	r.Reason = strings.Repeat("é", 5000) // 10000 bytes
	r.GuardChain = nil
	if err := l.Append(r); err != nil {
		t.Fatal(err)
	}
	if len(r.Reason) > maxReasonBytes || !strings.HasSuffix(r.Reason, "…") || !strings.HasPrefix(r.Reason, "éé") {
		t.Fatalf("reason of %d bytes: %.20q…", len(r.Reason), r.Reason)
	}
	recs, err := Tail(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].Reason != r.Reason || recs[0].GuardChain == nil || len(recs[0].GuardChain) != 0 {
		t.Fatalf("tail %+v", recs[0])
	}
}

func TestAppendRefusesInvalidRecord(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{})
	appendN(t, l, 0, 1)
	for name, mutate := range map[string]func(*Record){
		"decision":  func(r *Record) { r.Decision = "maybe" },
		"placement": func(r *Record) { r.Placement = "" },
		"event":     func(r *Record) { r.Event = "" },
		"code":      func(r *Record) { r.Code = "Policy Denied" },
		"trust":     func(r *Record) { r.Trust = "root" },
	} {
		r := typical(2)
		mutate(r)
		err := l.Append(r)
		if !errors.Is(err, reason.ErrAuditUnavailable) || !strings.Contains(err.Error(), ProblemSchemaViolation) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if err := l.Append(nil); !errors.Is(err, reason.ErrAuditUnavailable) {
		t.Errorf("nil record: %v", err)
	}
	if n := len(readLinesT(t, activePath(dir))); n != 1 {
		t.Fatalf("%d lines after refused appends, want 1", n)
	}
	// The chain goes on from the last good record.
	r := typical(3)
	if err := l.Append(r); err != nil || r.Seq != 2 {
		t.Fatalf("append after refusals: seq %d, %v", r.Seq, err)
	}
}

func TestTornTailRecovery(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{})
	recs := appendN(t, l, 0, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A writer died in the middle of its line.
	next := typical(3)
	next.Seq, next.Prev, next.TS = 4, recs[2].Hash, time.Now()
	full, _ := seal(appendBody(nil, next))
	torn := full[:len(full)/2]
	f, err := os.OpenFile(activePath(dir), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(torn); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	rep, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.Problem != ProblemTornLine || rep.FirstBadSeq != 4 || rep.Records != 3 || rep.Line != 4 {
		t.Fatalf("report %+v", rep)
	}
	// Tail skips the torn line.
	if tl, err := Tail(dir, 2); err != nil || len(tl) != 2 || tl[1].Seq != 3 {
		t.Fatalf("tail %+v %v", tl, err)
	}

	// The next writer cuts the fragment (kept aside), records that, goes on.
	l2 := openT(t, dir, Options{})
	r := typical(9)
	if err := l2.Append(r); err != nil {
		t.Fatal(err)
	}
	if r.Seq != 5 {
		t.Fatalf("seq %d, want 5 (after the torn_tail record)", r.Seq)
	}
	tl, err := Tail(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	if tl[0].Event != EventTornTail || tl[0].Seq != 4 || tl[0].Prev != recs[2].Hash || tl[0].Decision != "deny" ||
		!strings.Contains(tl[0].Reason, "after seq 3") {
		t.Fatalf("recovery record %+v", tl[0])
	}
	saved, _ := filepath.Glob(filepath.Join(dir, FileName+".torn-*"))
	if len(saved) != 1 {
		t.Fatalf("saved fragments %v", saved)
	}
	if b, _ := os.ReadFile(saved[0]); !bytes.Equal(b, torn) || !strings.Contains(tl[0].Reason, filepath.Base(saved[0])) {
		t.Fatalf("saved fragment %q", b)
	}
	rep, err = verify(dir, true)
	if err != nil || !rep.OK || rep.Records != 5 || rep.Files != 1 {
		t.Fatalf("report %+v %v", rep, err)
	}
}

func TestAppendRefusesUnreadableLastRecord(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{})
	appendN(t, l, 0, 2)
	f, err := os.OpenFile(activePath(dir), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("{\"seq\":3,\"garbage\n"); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	err = l.Append(typical(2))
	if !errors.Is(err, reason.ErrAuditUnavailable) || !strings.Contains(err.Error(), "unreadable") {
		t.Fatalf("err = %v", err)
	}
}

func TestLastLines(t *testing.T) {
	long := strings.Repeat("x", 20000) // longer than the first 8 KiB read
	data := "a\n" + long + "\nb\n" + long + "y\n" + "torn"
	f, err := os.CreateTemp(t.TempDir(), "l")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	size := int64(len(data))
	for _, c := range []struct {
		n    int
		want []string
	}{
		{1, []string{long + "y"}},
		{2, []string{"b", long + "y"}},
		{3, []string{long, "b", long + "y"}},
		{9, []string{"a", long, "b", long + "y"}},
		{0, []string{"a", long, "b", long + "y"}},
	} {
		lines, torn, err := LastLines(f, size, c.n)
		if err != nil || string(torn) != "torn" || len(lines) != len(c.want) {
			t.Fatalf("n=%d: %d lines, torn %q, %v", c.n, len(lines), torn, err)
		}
		for i := range lines {
			if string(lines[i]) != c.want[i] {
				t.Fatalf("n=%d line %d: %.10q… (%d bytes)", c.n, i, lines[i], len(lines[i]))
			}
		}
	}
	if lines, torn, err := LastLines(f, 4, 1); err != nil || len(lines) != 1 || string(lines[0]) != "a" || string(torn) != "xx" {
		t.Fatalf("prefix: %q %q %v", lines, torn, err)
	}
	if lines, torn, err := LastLines(f, 0, 1); err != nil || len(lines) != 0 || len(torn) != 0 {
		t.Fatalf("empty: %q %q %v", lines, torn, err)
	}
}
