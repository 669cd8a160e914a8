package dispatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/cmd/agentnode/auditverify"
	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/executor"
	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/reason"
)

// newHome makes a set-up AGENTNODE_HOME with the default config.
func newHome(t *testing.T) *Kernel {
	t.Helper()
	dir := t.TempDir()
	if _, _, err := configedit.Setup(home.ConfigPath(dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(home.AuditDir(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTNODE_CONFIG", "")
	return &Kernel{HomeDir: dir, StageTimeout: 300 * time.Millisecond, Executors: executor.Registry()}
}

// withStages replaces the pipeline for one test.
func withStages(t *testing.T, stages ...stage) {
	t.Helper()
	saved := decisionStages
	decisionStages = stages
	t.Cleanup(func() { decisionStages = saved })
}

func lastRecord(t *testing.T, k *Kernel) audit.Record {
	t.Helper()
	recs, err := auditverify.Tail(home.AuditDir(k.HomeDir), 1)
	if err != nil || len(recs) != 1 {
		t.Fatalf("tail: %v (%d records)", err, len(recs))
	}
	return recs[0]
}

func executeMustNotRun(t *testing.T) stage {
	return stage{name: "reached", code: reason.PolicyDenied, run: func(context.Context, *state) error {
		t.Error("a stage after the failing one ran")
		return nil
	}}
}

func TestStageFailuresDenyAndAudit(t *testing.T) {
	// The hanging stage returns only when its context ends, and then says
	// nil: Run denying with "did not finish within" is the proof that the
	// stage deadline is enforced and that a late success does not count.
	hang := func(ctx context.Context, _ *state) error {
		<-ctx.Done()
		return nil
	}
	cases := []struct {
		name string
		run  func(context.Context, *state) error
		code reason.Code
		msg  string
	}{
		{"panic", func(context.Context, *state) error { panic("boom") }, reason.RateLimited, "internal error in stage failing: boom"},
		{"timeout", hang, reason.RateLimited, "did not finish within"},
		{"uncoded error", func(context.Context, *state) error { return errors.New("disk on fire") }, reason.RateLimited, "disk on fire"},
		{"coded error", func(context.Context, *state) error { return reason.New(reason.InputDenied, "bad input") }, reason.InputDenied, "bad input"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := newHome(t)
			withStages(t,
				stage{name: "config", code: reason.ConfigInvalid, run: stageConfig},
				stage{name: "failing", code: reason.RateLimited, run: c.run},
				executeMustNotRun(t))
			res, err := k.Run(context.Background(), &Request{Package: "p", Tool: "t"})
			if err == nil {
				t.Fatal("a failing stage was allowed")
			}
			if got := reason.CodeOf(err); got != c.code {
				t.Fatalf("code = %q, want %q (%v)", got, c.code, err)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %q does not mention %q", err, c.msg)
			}
			if res.Decision != "deny" || res.Ran || res.Code != string(c.code) {
				t.Fatalf("result %+v", res)
			}
			rec := lastRecord(t, k)
			if rec.Decision != "deny" || rec.Code != string(c.code) || rec.Event != "decision" || rec.RequestID != res.RequestID {
				t.Fatalf("audit record %+v", rec)
			}
		})
	}
}

// TestTimedOutStageIsAwaited: a stage that overruns its deadline still
// holds the state; Run must not read it (deny, the decision record) before
// the stage has returned. The stage here notices its cancellation, keeps
// running until the test lets it go, and then writes the state. Before the
// fix runStage abandoned it: Run returned while the stage still ran, and
// the stage's late write raced with deny's (under -race: a reported race;
// without: the result's reason was the stage's, not the timeout's).
func TestTimedOutStageIsAwaited(t *testing.T) {
	k := newHome(t)
	cancelled, release := make(chan struct{}), make(chan struct{})
	slow := func(ctx context.Context, st *state) error {
		<-ctx.Done()
		close(cancelled)
		<-release
		st.res.Reason = "written late by the stage"
		st.res.GuardChain = append(st.res.GuardChain, "late")
		return nil
	}
	withStages(t,
		stage{name: "config", code: reason.ConfigInvalid, run: stageConfig},
		stage{name: "slow", code: reason.RateLimited, run: slow,
			timeout: func(*state) time.Duration { return 20 * time.Millisecond }},
		executeMustNotRun(t))
	type ran struct {
		res *Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := k.Run(context.Background(), &Request{Package: "p", Tool: "t"})
		done <- ran{res, err}
	}()
	select {
	case <-cancelled:
	case r := <-done:
		t.Fatalf("the slow stage was not reached: %v", r.err)
	}
	select {
	case r := <-done:
		close(release)
		t.Fatalf("Run returned (%v) while its timed-out stage was still running", r.err)
	case <-time.After(200 * time.Millisecond):
		// Run is still waiting for the stage (the 200 ms only give a
		// wrong Run the chance to return early).
	}
	close(release)
	r := <-done
	if reason.CodeOf(r.err) != reason.RateLimited || !strings.Contains(r.err.Error(), "did not finish within") {
		t.Fatalf("err = %v", r.err)
	}
	if r.res.Decision != "deny" || r.res.Reason != r.err.Error() {
		t.Fatalf("result %+v: the stage's late write was not overwritten by the denial", r.res)
	}
	if rec := lastRecord(t, k); rec.Decision != "deny" || rec.Reason != r.res.Reason || len(rec.GuardChain) != 1 {
		t.Fatalf("decision record %+v: not the state after the stage returned", rec)
	}
}

// TestPromptHonoursItsDeadline: a question nobody answers (Ask blocks on
// the TTY and cannot be interrupted) ends at the prompt deadline with
// policy_prompt; Run does not wait for the answer.
func TestPromptHonoursItsDeadline(t *testing.T) {
	k := newHome(t)
	k.PromptTimeout = 50 * time.Millisecond
	k.Interactive = true
	answer := make(chan struct{})
	defer close(answer)
	k.Ask = func(string) (bool, error) { <-answer; return true, nil }
	withStages(t,
		stage{name: "config", code: reason.ConfigInvalid, run: stageConfig},
		stage{name: "ask", code: reason.PolicyPrompt, run: func(ctx context.Context, st *state) error {
			yes, err := st.k.ask(ctx, "?")
			if err != nil {
				return reason.New(reason.PolicyPrompt, "prompt failed: %w", err)
			}
			if !yes {
				return errors.New("no")
			}
			return nil
		}, timeout: func(st *state) time.Duration { return st.k.promptTimeout() }},
		executeMustNotRun(t))
	_, err := k.Run(context.Background(), &Request{Package: "p", Tool: "t"})
	if reason.CodeOf(err) != reason.PolicyPrompt {
		t.Fatalf("err = %v", err)
	}
}

func TestDryRunAuditsNothing(t *testing.T) {
	k := newHome(t)
	withStages(t,
		stage{name: "config", code: reason.ConfigInvalid, run: stageConfig},
		stage{name: "failing", code: reason.PolicyDenied, run: func(context.Context, *state) error { return errors.New("no") }})
	res, err := k.Run(context.Background(), &Request{Package: "p", Tool: "t", DryRun: true})
	if err == nil || res.Decision != "deny" || !res.DryRun {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(home.AuditDir(k.HomeDir), audit.FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dry run wrote the audit log: %v", err)
	}
}

func TestAuditUnavailableBlocksExecution(t *testing.T) {
	k := newHome(t)
	// The audit directory is a file: nothing can be written.
	auditDir := home.AuditDir(k.HomeDir)
	if err := os.Remove(auditDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(auditDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ran := false
	withStages(t, stage{name: "config", code: reason.ConfigInvalid, run: stageConfig})
	saved := executeStage
	executeStage = stage{name: "execute", code: reason.PluginUnavailable, run: func(context.Context, *state) error {
		ran = true
		return nil
	}}
	t.Cleanup(func() { executeStage = saved })
	res, err := k.Run(context.Background(), &Request{Package: "p", Tool: "t"})
	if !errors.Is(err, reason.ErrAuditUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if ran || res.Ran || res.Decision != "deny" {
		t.Fatalf("executed without an audit record: ran=%v %+v", ran, res)
	}
}

func TestMissingConfigIsNotSetUp(t *testing.T) {
	k := &Kernel{HomeDir: t.TempDir()}
	t.Setenv("AGENTNODE_CONFIG", "")
	res, err := k.Run(context.Background(), &Request{Package: "p", Tool: "t"})
	if !errors.Is(err, reason.ErrNotSetUp) || res.Decision != "deny" {
		t.Fatalf("%+v %v", res, err)
	}
	// A refusal on an unset machine does not create the home.
	if _, err := os.Stat(home.AuditDir(k.HomeDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("audit dir created on an unset machine: %v", err)
	}
}

func TestPipelineOrder(t *testing.T) {
	var names []string
	for _, s := range decisionStages {
		names = append(names, s.name)
	}
	want := "config lockfile artifact trust minimum_trust placement policy rate_limit inspectors prompt"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("pipeline order\n got %s\nwant %s", got, want)
	}
}

// withExecute replaces the execute stage for one test.
func withExecute(t *testing.T, run func(context.Context, *state) error) {
	t.Helper()
	saved := executeStage
	executeStage = stage{name: "execute", code: reason.SandboxUnavailable, run: run}
	t.Cleanup(func() { executeStage = saved })
}

// TestOutcomeWriteFailureHasCode: when the outcome record cannot be
// written after the tool ran, the result says so with audit_unavailable,
// never with an empty code.
func TestOutcomeWriteFailureHasCode(t *testing.T) {
	k := newHome(t)
	withStages(t, stage{name: "config", code: reason.ConfigInvalid, run: stageConfig})
	withExecute(t, func(_ context.Context, st *state) error {
		st.res.Ran = true
		return st.log.Close() // the log is gone under the run's feet
	})
	res, err := k.Run(context.Background(), &Request{Package: "p", Tool: "t"})
	if !errors.Is(err, reason.ErrAuditUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if res.Code != string(reason.AuditUnavailable) || !strings.Contains(res.Reason, "write outcome record") || !res.Ran {
		t.Fatalf("result %+v", res)
	}
}

// TestOutcomeRecordedDespiteLoweredFsize: a tool that lowered agentnode's
// RLIMIT_FSIZE to 0 while it ran (prlimit on its parent, which the host
// filter refuses; this is the second line) does not stop the outcome
// record, and the limit is back afterwards.
func TestOutcomeRecordedDespiteLoweredFsize(t *testing.T) {
	k := newHome(t)
	var fsize unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &fsize); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Setrlimit(unix.RLIMIT_FSIZE, &fsize) })
	withStages(t, stage{name: "config", code: reason.ConfigInvalid, run: stageConfig})
	withExecute(t, func(context.Context, *state) error {
		return unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 0, Max: fsize.Max})
	})
	res, err := k.Run(context.Background(), &Request{Package: "p", Tool: "t"})
	if err != nil || res.Code != "" {
		t.Fatalf("Run: %+v %v", res, err)
	}
	if rec := lastRecord(t, k); rec.Event != "outcome" || rec.RequestID != res.RequestID {
		t.Fatalf("last record %+v", rec)
	}
	var now unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &now); err != nil || now != fsize {
		t.Fatalf("FSIZE %+v, want %+v", now, fsize)
	}
}
