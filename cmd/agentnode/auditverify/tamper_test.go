package auditverify

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/audit"
)

// TestVerifyDetectsTampering builds a 10-record log, changes it the way an
// attacker or a crash would, and checks that Verify names the problem and
// the first broken seq.
func TestVerifyDetectsTampering(t *testing.T) {
	cases := []struct {
		name    string
		tamper  func(t *testing.T, lines [][]byte) [][]byte
		problem string
		seq     uint64
		line    int
	}{
		{
			name: "edit a field",
			tamper: func(t *testing.T, lines [][]byte) [][]byte {
				// seq 5 (index 4) is a deny: make it an allow.
				lines[4] = bytes.Replace(lines[4], []byte(`"decision":"deny"`), []byte(`"decision":"allow"`), 1)
				return lines
			},
			problem: ProblemHashMismatch, seq: 5, line: 5,
		},
		{
			name: "edit a boolean",
			tamper: func(t *testing.T, lines [][]byte) [][]byte {
				lines[2] = bytes.Replace(lines[2], []byte(`"root":false`), []byte(`"root":true `), 1)
				return lines
			},
			problem: ProblemHashMismatch, seq: 3, line: 3,
		},
		{
			name: "edit the hash",
			tamper: func(t *testing.T, lines [][]byte) [][]byte {
				lines[6] = hashMember.ReplaceAll(lines[6], []byte(`,"hash":"`+strings.Repeat("ab", 32)+`"}`+"\n"))
				return lines
			},
			problem: ProblemHashMismatch, seq: 7, line: 7,
		},
		{
			name: "edit and reseal a record",
			tamper: func(t *testing.T, lines [][]byte) [][]byte {
				// The forger recomputes seq 5's hash; seq 6's prev gives it away.
				lines[4] = reseal(t, bytes.Replace(lines[4], []byte(`"decision":"deny"`), []byte(`"decision":"allow"`), 1))
				return lines
			},
			problem: ProblemPrevMismatch, seq: 6, line: 6,
		},
		{
			name:    "delete a line",
			tamper:  func(t *testing.T, lines [][]byte) [][]byte { return slices.Delete(lines, 4, 5) },
			problem: ProblemSeqGap, seq: 5, line: 5,
		},
		{
			name:    "delete two lines",
			tamper:  func(t *testing.T, lines [][]byte) [][]byte { return slices.Delete(lines, 3, 5) },
			problem: ProblemSeqGap, seq: 4, line: 4,
		},
		{
			name: "swap two lines",
			tamper: func(t *testing.T, lines [][]byte) [][]byte {
				lines[4], lines[5] = lines[5], lines[4]
				return lines
			},
			problem: ProblemSeqOrder, seq: 5, line: 5,
		},
		{
			name: "move a line back",
			tamper: func(t *testing.T, lines [][]byte) [][]byte {
				l := lines[2]
				lines = slices.Delete(lines, 2, 3)
				return slices.Insert(lines, 6, l)
			},
			problem: ProblemSeqOrder, seq: 3, line: 3,
		},
		{
			name: "insert a forged line with a recomputed hash but a wrong prev",
			tamper: func(t *testing.T, lines [][]byte) [][]byte {
				forged := bytes.Replace(lines[4], []byte(`"reason":"delete denied by guard policy"`), []byte(`"reason":"nothing to see"`), 1)
				// prev = the hash of seq 3 (the prev of seq 4), not of seq 4.
				prev3 := prevOf(t, lines[3])
				forged = bytes.Replace(forged, []byte(`"prev":"`+prevOf(t, lines[4])), []byte(`"prev":"`+prev3), 1)
				forged = reseal(t, forged)
				return slices.Insert(lines, 4, forged) // as seq 5, before the real seq 5
			},
			problem: ProblemPrevMismatch, seq: 5, line: 5,
		},
		{
			name: "insert a forged line with a correct prev",
			tamper: func(t *testing.T, lines [][]byte) [][]byte {
				// The forger chains it to seq 4; the real seq 5 then repeats a seq.
				forged := bytes.Replace(lines[4], []byte(`"decision":"deny"`), []byte(`"decision":"allow"`), 1)
				return slices.Insert(lines, 4, reseal(t, forged))
			},
			problem: ProblemSeqOrder, seq: 6, line: 6,
		},
		{
			name: "truncate the last line mid-way",
			tamper: func(t *testing.T, lines [][]byte) [][]byte {
				lines[9] = lines[9][:len(lines[9])/2]
				return lines
			},
			problem: ProblemTornLine, seq: 10, line: 10,
		},
		{
			name: "drop the last newline",
			tamper: func(t *testing.T, lines [][]byte) [][]byte {
				lines[9] = bytes.TrimSuffix(lines[9], []byte("\n"))
				return lines
			},
			problem: ProblemTornLine, seq: 10, line: 10,
		},
		{
			name: "garbage line",
			tamper: func(t *testing.T, lines [][]byte) [][]byte {
				return slices.Insert(lines, 7, []byte("{\"seq\":8, oops\n"))
			},
			problem: ProblemParseError, seq: 8, line: 8,
		},
		{
			name: "empty line",
			tamper: func(t *testing.T, lines [][]byte) [][]byte {
				return slices.Insert(lines, 7, []byte("\n"))
			},
			problem: ProblemParseError, seq: 8, line: 8,
		},
		{
			name: "resealed schema violation",
			tamper: func(t *testing.T, lines [][]byte) [][]byte {
				lines[1] = reseal(t, bytes.Replace(lines[1], []byte(`"decision":"allow"`), []byte(`"decision":"maybe"`), 1))
				return lines
			},
			problem: ProblemSchemaViolation, seq: 2, line: 2,
		},
		{
			name: "resealed extra member (a tool input)",
			tamper: func(t *testing.T, lines [][]byte) [][]byte {
				lines[1] = reseal(t, bytes.Replace(lines[1], []byte(`"reason":`), []byte(`"input":{"path":"/etc/shadow"},"reason":`), 1))
				return lines
			},
			problem: ProblemSchemaViolation, seq: 2, line: 2,
		},
		{
			name: "first record with a non-genesis prev",
			tamper: func(t *testing.T, lines [][]byte) [][]byte {
				lines[0] = reseal(t, bytes.Replace(lines[0], []byte(`"prev":"`+audit.Genesis), []byte(`"prev":"`+strings.Repeat("1", 64)), 1))
				return lines
			},
			problem: ProblemPrevMismatch, seq: 1, line: 1,
		},
		{
			name:    "delete the first line",
			tamper:  func(t *testing.T, lines [][]byte) [][]byte { return lines[1:] },
			problem: ProblemHeadMissing, seq: 1, line: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, dir, audit.Options{})
			appendN(t, l, 0, 10)
			if rep, err := Verify(dir); err != nil || !rep.OK {
				t.Fatalf("untampered: %+v %v", rep, err)
			}
			lines := readLinesT(t, activePath(dir))
			writeLinesT(t, activePath(dir), c.tamper(t, lines))
			for _, full := range []bool{false, true} {
				rep, err := verify(dir, full)
				if err != nil {
					t.Fatal(err)
				}
				if rep.OK || rep.Problem != c.problem || rep.FirstBadSeq != c.seq || rep.Line != c.line || rep.File != audit.FileName || rep.Detail == "" {
					t.Fatalf("full=%v: report %+v, want %s at seq %d line %d", full, rep, c.problem, c.seq, c.line)
				}
				if rep.Records != c.line-1 {
					t.Errorf("full=%v: %d records verified before line %d", full, rep.Records, c.line)
				}
			}
		})
	}
}

func TestVerifyDetectsTamperingAcrossRotatedFiles(t *testing.T) {
	setup := func(t *testing.T) (string, []audit.LogFile) {
		dir := t.TempDir()
		l := openT(t, dir, audit.Options{MaxSizeBytes: 2048, MaxFiles: 100})
		appendN(t, l, 0, 30)
		files, err := audit.ListFiles(dir)
		if err != nil || len(files) < 4 {
			t.Fatalf("files %v %v", files, err)
		}
		return dir, files
	}
	t.Run("edit in a rotated file", func(t *testing.T) {
		dir, files := setup(t)
		name := files[1].Name
		path := filepath.Join(dir, name)
		lines := readLinesT(t, path)
		lines[1] = bytes.Replace(lines[1], []byte(`"tool":"read_file"`), []byte(`"tool":"rm_rf___"`), 1)
		writeLinesT(t, path, lines)
		first := readLinesT(t, filepath.Join(dir, files[0].Name))
		rep, err := Verify(dir)
		if err != nil {
			t.Fatal(err)
		}
		want := uint64(len(first) + 2)
		if rep.OK || rep.Problem != ProblemHashMismatch || rep.File != name || rep.Line != 2 || rep.FirstBadSeq != want {
			t.Fatalf("report %+v, want hash_mismatch in %s line 2 seq %d", rep, name, want)
		}
	})
	t.Run("delete a rotated file", func(t *testing.T) {
		dir, files := setup(t)
		n := len(readLinesT(t, filepath.Join(dir, files[0].Name)))
		if err := os.Remove(filepath.Join(dir, files[1].Name)); err != nil {
			t.Fatal(err)
		}
		rep, err := Verify(dir)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK || rep.Problem != ProblemSeqGap || rep.FirstBadSeq != uint64(n+1) || rep.File != files[2].Name || rep.Line != 1 {
			t.Fatalf("report %+v", rep)
		}
	})
	t.Run("swap two rotated files", func(t *testing.T) {
		dir, files := setup(t)
		a, b := filepath.Join(dir, files[1].Name), filepath.Join(dir, files[2].Name)
		tmp := a + ".tmp"
		for _, mv := range [][2]string{{a, tmp}, {b, a}, {tmp, b}} {
			if err := os.Rename(mv[0], mv[1]); err != nil {
				t.Fatal(err)
			}
		}
		n := len(readLinesT(t, filepath.Join(dir, files[0].Name)))
		rep, err := Verify(dir)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK || rep.Problem != ProblemSeqOrder || rep.FirstBadSeq != uint64(n+1) {
			t.Fatalf("report %+v", rep)
		}
	})
	t.Run("torn line inside a rotated file", func(t *testing.T) {
		dir, files := setup(t)
		path := filepath.Join(dir, files[1].Name)
		lines := readLinesT(t, path)
		lines[len(lines)-1] = lines[len(lines)-1][:40]
		writeLinesT(t, path, lines)
		rep, err := Verify(dir)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK || rep.Problem != ProblemTornLine || rep.File != files[1].Name {
			t.Fatalf("report %+v", rep)
		}
	})
}

func prevOf(t *testing.T, line []byte) string {
	t.Helper()
	_, rest, ok := bytes.Cut(line, []byte(`"prev":"`))
	if !ok || len(rest) < 64 {
		t.Fatalf("no prev in %s", line)
	}
	return string(rest[:64])
}
