package reason

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"
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
	want := map[Code]int{NotSetUp: 2, ConfigInvalid: 2, PolicyDenied: 3, PluginUnavailable: 3, Timeout: 1, KilledMemory: 1, RuntimeUnsupported: 3, WorkspaceInvalid: 2, SandboxRuntimeUnavailable: 3}
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
	if len(Codes) != 28 {
		t.Errorf("specs/cli.md has 28 codes, Codes has %d", len(Codes))
	}
}

// TestNewKeepsEveryCause: a cause wrapped with %w stays reachable through
// errors.Is and errors.As however many there are, and through further
// wrapping by fmt.Errorf and Wrap; a message without %w has no cause.
func TestNewKeepsEveryCause(t *testing.T) {
	first := errors.New("first cause")
	second := &os.PathError{Op: "open", Path: "/x", Err: os.ErrNotExist}
	cases := map[string]error{
		"one %w":     New(RateLimited, "state: %w", first),
		"two %w":     New(RateLimited, "%w: state: %w", first, second),
		"wrapped":    fmt.Errorf("outer: %w", New(RateLimited, "%w: %w", first, second)),
		"via Wrap":   Wrap(PolicyDenied, New(RateLimited, "%w: %w", first, second), "ctx"),
		"three deep": fmt.Errorf("a: %w", fmt.Errorf("b: %w", New(RateLimited, "%v %w %w", 1, first, second))),
	}
	for name, err := range cases {
		if !errors.Is(err, first) {
			t.Errorf("%s: errors.Is(first) = false: %v", name, err)
		}
		if !errors.Is(err, ErrRateLimited) {
			t.Errorf("%s: errors.Is(ErrRateLimited) = false", name)
		}
		if name != "one %w" {
			var pe *os.PathError
			if !errors.As(err, &pe) || !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: the second cause is lost: %v", name, err)
			}
		}
	}
	if got := New(RateLimited, "%w: %w", first, second).Error(); got != "first cause: open /x: file does not exist" {
		t.Errorf("message = %q", got)
	}
	plain := New(PolicyDenied, "no cause %d", 1)
	if errors.Unwrap(plain) != nil {
		t.Errorf("a message without %%w has a cause: %v", errors.Unwrap(plain))
	}
	if CodeOf(plain) != PolicyDenied {
		t.Errorf("CodeOf = %q", CodeOf(plain))
	}
}

// TestCLIReasonCodes keeps specs/cli.md's table of reason codes equal to
// Codes, exit codes included.
func TestCLIReasonCodes(t *testing.T) {
	b, err := os.ReadFile("../../specs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([0-9]) \\|")
	documented := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		exit, _ := strconv.Atoi(m[2])
		if _, dup := documented[m[1]]; dup {
			t.Errorf("cli.md lists %s twice", m[1])
		}
		documented[m[1]] = exit
	}
	if len(documented) != len(Codes) {
		t.Errorf("cli.md documents %d reason codes, Codes has %d", len(documented), len(Codes))
	}
	for _, c := range Codes {
		exit, ok := documented[string(c)]
		switch {
		case !ok:
			t.Errorf("reason code %s is not documented in specs/cli.md", c)
		case exit != c.ExitCode():
			t.Errorf("specs/cli.md: %s exits %d, agentnode exits %d", c, exit, c.ExitCode())
		}
	}
}
