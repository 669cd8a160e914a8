package auditverify

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/lockfile"
)

// typical is a record as dispatch writes it.
func typical(i int) *audit.Record {
	code := 0
	ms := int64(1234)
	r := &audit.Record{
		Event:      audit.EventDecision,
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
		Env:        audit.Env{CI: false, Interactive: true, SecretsPresent: true, Root: false},
	}
	if i%2 == 1 {
		r.Event = audit.EventOutcome
		r.ExitCode = &code
		r.DurationMS = &ms
	}
	if i%5 == 4 {
		r.Decision, r.Code, r.Placement, r.Reason = "deny", "policy_denied", "none", "delete denied by guard policy"
	}
	return r
}

func openT(t testing.TB, dir string, opts audit.Options) *audit.Log {
	t.Helper()
	l, err := audit.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func appendN(t testing.TB, l *audit.Log, from, n int) []*audit.Record {
	t.Helper()
	var out []*audit.Record
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

// writeLinesT writes lines (each with its newline) to path.
func writeLinesT(t testing.TB, path string, lines [][]byte) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

var hashMember = regexp.MustCompile(`,"hash":"([0-9a-f]{64})"\}\n?$`)

// reseal replaces a (modified) line's hash with the correct one, computed
// from the definition in specs/audit.md without the kernel's code (SHA-256
// of the line with its trailing `,"hash":"…"` member removed): what a
// forger who knows the format does.
func reseal(t testing.TB, line []byte) []byte {
	t.Helper()
	m := hashMember.FindSubmatchIndex(line)
	if m == nil {
		t.Fatalf("line has no trailing hash member: %s", line)
	}
	sum := sha256.Sum256(append(append([]byte{}, line[:m[0]]...), '}'))
	return hashMember.ReplaceAll(line, []byte(`,"hash":"`+hex.EncodeToString(sum[:])+`"}`+"\n"))
}

func activePath(dir string) string { return filepath.Join(dir, audit.FileName) }

// testKey is a seal key for tests that do not need the OS keychain.
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
func anchoredHome(t testing.TB, key []byte) (dir string, a *audit.Anchor) {
	t.Helper()
	h := t.TempDir()
	return filepath.Join(h, "audit"), &audit.Anchor{
		Path: filepath.Join(h, "state", "audit.anchor"),
		Key:  func(string) ([]byte, error) { return key, nil },
	}
}

func verifyAnchoredT(t testing.TB, dir string, a *audit.Anchor) *Report {
	t.Helper()
	rep, err := VerifyAnchored(dir, a)
	if err != nil {
		t.Fatalf("VerifyAnchored: %v", err)
	}
	return rep
}
