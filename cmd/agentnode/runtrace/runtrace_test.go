package runtrace

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

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
