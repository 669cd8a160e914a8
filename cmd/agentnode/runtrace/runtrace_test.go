package runtrace

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/stats"

	"github.com/agentnode/agentnode/cmd/agentnode/gcpercent"
	"github.com/agentnode/agentnode/kernel/reason"
)

func TestTraceOrderKindsAndErrors(t *testing.T) {
	tr := New()
	first := time.Now()
	tr.Stage("config", first, nil)
	tr.Stage("minimum_trust", time.Now(), reason.New(reason.TrustBelowMinimum, "too low"))
	end, dial := tr.Launch("trust-attest")
	if len(dial) != 1 {
		t.Fatalf("Launch gave %d dial options, want the stats handler", len(dial))
	}
	end(errors.New("no code"))
	tr.Stage("audit_decision", time.Now(), nil)
	evs := tr.Finish()
	tr.Stage("execute", time.Now(), nil) // after Finish: dropped
	if again := tr.Finish(); len(again) != len(evs) {
		t.Fatalf("an event after Finish was kept: %d events, then %d", len(evs), len(again))
	}

	var got []string
	for _, e := range evs {
		got = append(got, e.Kind+":"+e.Name+":"+e.Plugin+":"+e.Error)
		if e.DurationMS < 0 || e.StartMS < 0 {
			t.Errorf("%+v: negative time", e)
		}
	}
	want := []string{
		"process:start::",
		"stage:config::",
		"stage:minimum_trust::trust_below_minimum",
		"plugin_launch:launch:trust-attest:error",
		"audit:decision::",
		"total:total::",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	total := evs[len(evs)-1]
	if total.DurationMS < evs[1].StartMS {
		t.Errorf("total %.3f ms ends before the first stage began (%.3f ms)", total.DurationMS, evs[1].StartMS)
	}

	var buf bytes.Buffer
	tr.Print(&buf)
	out := buf.String()
	for _, line := range []string{"process start\n", "stage minimum_trust [trust_below_minimum]\n", "plugin_launch trust-attest [error]\n", "audit decision\n", "total\n"} {
		if !strings.Contains(out, line) {
			t.Errorf("printed trace lacks %q:\n%s", line, out)
		}
	}
}

// The trace's origin is the start of package initialization, before New.
func TestOriginIsInitialization(t *testing.T) {
	tr := New()
	if tr.origin != gcpercent.Start || !tr.origin.Before(time.Now()) {
		t.Fatalf("origin %v, want gcpercent.Start %v", tr.origin, gcpercent.Start)
	}
	if e := tr.events[0]; e.Kind != KindProcess || e.Name != "start" || e.DurationMS < 0 {
		t.Fatalf("first event %+v, want the process start", e)
	}
}

// countingWriter counts the Writes made to it.
type countingWriter struct {
	buf    bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.buf.Write(p)
}

func (w *countingWriter) String() string { return w.buf.String() }

// A call's trace (mcp serve --trace): no process entry, its origin is the
// call; plugin calls are routed to the trace their context carries; the
// block is printed in one Write with the given prefix.
func TestCallTraceRoutesPluginCalls(t *testing.T) {
	a, b := NewCall(), NewCall()
	a.origin = a.origin.Add(-10 * time.Millisecond) // the call began 10 ms ago
	opts := Dial("trust-attest")
	if len(opts) != 1 {
		t.Fatalf("Dial gave %d dial options, want the stats handler", len(opts))
	}
	h := &callStats{key: "trust-attest"} // what Dial installs
	call := func(ctx context.Context, method string) {
		ctx = h.TagRPC(ctx, &stats.RPCTagInfo{FullMethodName: method})
		begin := a.origin.Add(2 * time.Millisecond) // after the stage below began
		h.HandleRPC(ctx, &stats.End{BeginTime: begin, EndTime: begin.Add(time.Millisecond)})
	}
	call(WithTrace(context.Background(), a), "/agentnode.trust.v1.Trust/Evaluate")
	call(WithTrace(context.Background(), b), "/agentnode.guard.v1.Guard/Inspect")
	call(context.Background(), "/agentnode.trust.v1.Trust/Evaluate")          // no trace: dropped
	call(WithTrace(context.Background(), a), "/plugin.GRPCStdio/StreamStdio") // go-plugin's own: not recorded
	a.Stage("config", a.origin.Add(time.Millisecond), nil)

	var w countingWriter
	a.PrintAs(&w, "agentnode: trace abc123: ")
	if w.writes != 1 {
		t.Errorf("the trace took %d writes, want 1 (concurrent calls' traces must not interleave)", w.writes)
	}
	lines := strings.Split(strings.TrimSuffix(w.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("trace of a:\n%s\nwant a header, the stage, the Evaluate call and the total", w.String())
	}
	if !regexp.MustCompile(`^agentnode: trace abc123: +start_ms +dur_ms +event$`).MatchString(lines[0]) {
		t.Errorf("header %q", lines[0])
	}
	for i, want := range []string{"stage config", "plugin_call trust-attest Evaluate", "total"} {
		if !regexp.MustCompile(`^agentnode: trace abc123: +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}  ` + want + `$`).MatchString(lines[i+1]) {
			t.Errorf("line %d %q, want %q", i+1, lines[i+1], want)
		}
	}
	evs := b.Finish()
	if len(evs) != 2 || evs[0].Kind != KindCall || evs[0].Name != "Inspect" || evs[1].Kind != KindTotal {
		t.Fatalf("trace of b: %+v, want its Inspect call and the total", evs)
	}
}

// Launches prints each launch of a shared host as a block of its own.
func TestLaunchesPrintsEachLaunch(t *testing.T) {
	var w countingWriter
	hook := Launches(&w, "agentnode: trace launch: ")
	end, dial := hook("guard-builtin")
	if len(dial) != 1 {
		t.Fatalf("the launch hook gave %d dial options, want the stats handler", len(dial))
	}
	if w.writes != 0 {
		t.Fatalf("printed before the launch ended: %q", w.String())
	}
	end(reason.New(reason.PluginUnavailable, "no such plugin"))
	out := w.String()
	if w.writes != 1 || !regexp.MustCompile(`(?m)^agentnode: trace launch: +[0-9.]+ +[0-9.]+  plugin_launch guard-builtin \[plugin_unavailable\]$`).MatchString(out) {
		t.Fatalf("%d writes:\n%s\nwant one block with the failed launch", w.writes, out)
	}
}
