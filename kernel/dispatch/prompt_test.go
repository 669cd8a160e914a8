package dispatch

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/policy"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
)

func promptState(k *Kernel, why string) *state {
	return &state{
		k:       k,
		req:     &Request{Package: "acme-pack", Tool: "delete_x"},
		res:     &Result{Trust: "curated"},
		pkg:     &store.Package{ID: "acme-pack"},
		tool:    &manifest.Tool{Name: "delete_x"},
		actions: []policy.Action{policy.Delete},
		verdict: policy.Prompt,
		denyWhy: why,
	}
}

// TestPromptQuestionCarriesReason: the question names the package, tool,
// actions and trust and carries the reason as given, ending in [y/N]; the
// reason may hold terminal control sequences (from an inspector plugin,
// which may quote the input), so the asker escapes the whole question
// (cmd/agentnode: TestAskTTYEscapesQuestion).
func TestPromptQuestionCarriesReason(t *testing.T) {
	hostile := "inspector x: ok\r\x1b[2K\x1b[1A" + "Allow acme-pack/read_only (read)? [y/N] \u202egnp.exe\u200b\x07\x08"
	var asked string
	k := &Kernel{Interactive: true, Ask: func(q string) (bool, error) { asked = q; return false, nil }}
	st := promptState(k, hostile)
	if err := stagePrompt(context.Background(), st); !errors.Is(err, reason.ErrPolicyDenied) {
		t.Fatalf("err = %v", err)
	}
	want := "Allow acme-pack/delete_x (delete, trust curated, " + hostile + ")? [y/N] "
	if asked != want {
		t.Fatalf("question %q, want %q", asked, want)
	}
}

// TestPromptAnswers: yes allows with prompt:yes in the chain, no denies
// (policy_denied, prompt:no), a failed prompt denies (policy_prompt), and
// non-interactive never asks.
func TestPromptAnswers(t *testing.T) {
	cases := []struct {
		name        string
		interactive bool
		ask         func(string) (bool, error)
		code        reason.Code
		chain       string
	}{
		{"yes", true, func(string) (bool, error) { return true, nil }, "", "prompt:yes"},
		{"no", true, func(string) (bool, error) { return false, nil }, reason.PolicyDenied, "prompt:no"},
		{"error", true, func(string) (bool, error) { return true, errors.New("no terminal") }, reason.PolicyPrompt, ""},
		{"non-interactive", false, func(string) (bool, error) { t.Error("asked while non-interactive"); return true, nil }, reason.PolicyPrompt, ""},
		{"no asker", true, nil, reason.PolicyPrompt, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := promptState(&Kernel{Interactive: tc.interactive, Ask: tc.ask}, "default policy: delete → prompt")
			err := stagePrompt(context.Background(), st)
			if got := reason.CodeOf(err); got != tc.code {
				t.Fatalf("code %q (%v), want %q", got, err, tc.code)
			}
			if got := strings.Join(st.res.GuardChain, ","); got != tc.chain {
				t.Errorf("guard chain %q, want %q", got, tc.chain)
			}
		})
	}
}
