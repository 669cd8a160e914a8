package reason

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestWrappedCodeSurvives(t *testing.T) {
	base := New(PolicyDenied, "action %s denied", "delete")
	err := fmt.Errorf("dispatch: %w", base)
	if !errors.Is(err, ErrPolicyDenied) {
		t.Fatalf("errors.Is lost the sentinel: %v", err)
	}
	if errors.Is(err, ErrRateLimited) {
		t.Fatalf("matched the wrong sentinel")
	}
	if got := CodeOf(err); got != PolicyDenied {
		t.Fatalf("CodeOf = %q", got)
	}
	if CodeOf(errors.New("plain")) != "" {
		t.Fatalf("plain error has a code")
	}
}

func TestNewKeepsCause(t *testing.T) {
	err := New(AuditUnavailable, "open audit log: %w", fs.ErrPermission)
	if !errors.Is(err, fs.ErrPermission) || !errors.Is(err, ErrAuditUnavailable) {
		t.Fatalf("cause or code lost: %v", err)
	}
	if err.Error() != "open audit log: permission denied" {
		t.Fatalf("message = %q", err.Error())
	}
}

func TestExitCodes(t *testing.T) {
	want := map[Code]int{NotSetUp: 2, ConfigInvalid: 2, PolicyDenied: 3, PluginUnavailable: 3, Timeout: 1, KilledMemory: 1}
	for c, w := range want {
		if c.ExitCode() != w {
			t.Errorf("%s exit = %d, want %d", c, c.ExitCode(), w)
		}
	}
	seen := map[Code]bool{}
	for _, c := range Codes {
		if seen[c] {
			t.Errorf("duplicate code %s", c)
		}
		seen[c] = true
	}
	if len(Codes) != 25 {
		t.Errorf("there are 25 codes (CONTRACT.md's 24 and killed_memory), Codes has %d", len(Codes))
	}
}
