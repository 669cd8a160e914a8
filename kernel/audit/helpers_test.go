package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// typical is a record as dispatch writes it.
func typical(i int) *Record {
	code := 0
	ms := int64(1234)
	r := &Record{
		Event:      EventDecision,
		RequestID:  fmt.Sprintf("req-%06d-4f1c2a9b", i/2), // a decision and its outcome
		Package:    "acme-file-tools",
		Version:    "1.4.2",
		Tool:       "read_file",
		Action:     "read",
		Trust:      "verified",
		Placement:  "sandbox",
		Backend:    "libcontainer",
		Decision:   "allow",
		Code:       "",
		Reason:     "allowed by guard policy (read: allow)",
		GuardChain: []string{"policy", "secret-scan", "path-guard"},
		Env:        Env{CI: false, Interactive: true, SecretsPresent: true, Root: false},
	}
	if i%2 == 1 {
		r.Event = EventOutcome
		r.ExitCode = &code
		r.DurationMS = &ms
	}
	if i%5 == 4 {
		r.Decision, r.Code, r.Placement, r.Reason = "deny", "policy_denied", "none", "delete denied by guard policy"
	}
	return r
}

func openT(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func appendN(t testing.TB, l *Log, from, n int) []*Record {
	t.Helper()
	var out []*Record
	for i := from; i < from+n; i++ {
		r := typical(i)
		if err := l.Append(r); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		out = append(out, r)
	}
	return out
}

func readLinesT(t testing.TB, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("%s does not end in a newline", path)
	}
	return bytes.SplitAfter(data[:len(data)-1], []byte("\n"))
}

// writeLinesT writes lines (each with its newline) to path.
func writeLinesT(t testing.TB, path string, lines [][]byte) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

var hashMember = regexp.MustCompile(`,"hash":"([0-9a-f]{64})"\}\n?$`)

// independentHash computes a line's hash from the definition in
// specs/audit.md without the package's code: SHA-256 of the line with its
// trailing `,"hash":"…"` member removed.
func independentHash(t testing.TB, line []byte) (stored, computed string) {
	t.Helper()
	m := hashMember.FindSubmatchIndex(line)
	if m == nil {
		t.Fatalf("line has no trailing hash member: %s", line)
	}
	body := append(append([]byte{}, line[:m[0]]...), '}')
	sum := sha256.Sum256(body)
	return string(line[m[2]:m[3]]), hex.EncodeToString(sum[:])
}

// reseal replaces a (modified) line's hash with the correct one: what a
// forger who knows the format does.
func reseal(t testing.TB, line []byte) []byte {
	t.Helper()
	_, h := independentHash(t, line)
	return hashMember.ReplaceAll(line, []byte(`,"hash":"`+h+`"}`+"\n"))
}

func activePath(dir string) string { return filepath.Join(dir, FileName) }
