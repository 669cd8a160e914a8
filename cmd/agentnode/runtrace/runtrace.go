// Package runtrace collects and prints the trace of one `agentnode run
// --trace`: when the process started, each decision stage, the audit record
// writes, the execute stage, each plugin launch and each call to a plugin,
// and the total, so that a user can tell agentnode's cost from the tool's
// (specs/cli.md, "Tracing a run").
//
// The kernel only calls hooks (dispatch.Kernel.Trace, pluginhost.Options.
// Trace); everything here is the front end's. Without --trace no Trace is
// made and the hooks stay nil.
package runtrace

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/agentnode/agentnode/cmd/agentnode/gcpercent"
	"github.com/agentnode/agentnode/kernel/reason"
)

// Kinds of events.
const (
	KindProcess = "process"       // process start to New
	KindStage   = "stage"         // a decision stage or "execute"
	KindAudit   = "audit"         // an audit record write: "decision" or "outcome"
	KindLaunch  = "plugin_launch" // a plugin's start: verify, exec, handshake, Info
	KindCall    = "plugin_call"   // one gRPC call to a plugin (Evaluate, Inspect, Availability, Run…)
	KindTotal   = "total"         // process start to Finish
)

// Event is one timed entry of a trace. Its field names are stable
// (specs/cli.md): they are the `trace` array of `agentnode run --json
// --trace`.
type Event struct {
	Kind string `json:"kind"`
	// Name is the stage name, the audit record's event (decision,
	// outcome), the plugin call's method (Evaluate), "launch" for a
	// plugin launch, and "start" / "total" for the process entries.
	Name string `json:"name"`
	// Plugin is the plugin's kind-name (trust-curated) of a launch or call.
	Plugin string `json:"plugin,omitempty"`
	// StartMS is when the event began, in milliseconds since the process
	// started; DurationMS is how long it took.
	StartMS    float64 `json:"start_ms"`
	DurationMS float64 `json:"duration_ms"`
	// Error is set when the event failed: the reason code of a stage that
	// refused the request or of a failed launch or write, the gRPC status
	// code of a failed call, else "error".
	Error string `json:"error,omitempty"`
}

// Trace collects events. It is safe for concurrent use (plugins launch
// in the background and stages run on goroutines of their own).
type Trace struct {
	origin time.Time // the process start: gcpercent.Start

	mu       sync.Mutex
	events   []Event
	finished bool
}

// NewCall starts the trace of one call of a long-running process (`mcp
// serve --trace`): its origin is now, and it has no "start" entry; its
// total is the call's time.
func NewCall() *Trace { return &Trace{origin: time.Now()} }

type traceKey struct{}

// WithTrace returns ctx carrying t: a plugin call made with it (or a
// context derived from it) on a connection dialed with Dial is recorded
// in t.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// Dial returns the dial options of a plugin connection whose calls are
// recorded in the trace their context carries (WithTrace), for a host
// shared by many calls.
func Dial(key string) []grpc.DialOption {
	return []grpc.DialOption{grpc.WithStatsHandler(&callStats{key: key})}
}

// Launches is pluginhost.Options.Trace for a host shared by many calls
// (`mcp serve --trace`): each plugin launch is printed to w as a trace of
// its own, its lines starting with prefix, and each call to a plugin is
// recorded in the trace its context carries (WithTrace).
func Launches(w io.Writer, prefix string) func(key string) (func(error), []grpc.DialOption) {
	return func(key string) (func(error), []grpc.DialOption) {
		t := NewCall()
		start := t.origin
		return func(err error) {
			t.add(Event{Kind: KindLaunch, Name: "launch", Plugin: key, Error: errCode(err)}, start, time.Now())
			t.PrintAs(w, prefix)
		}, Dial(key)
	}
}

// New starts a trace. Its origin is when the process's package
// initialization began (gcpercent.Start, the first package to initialize):
// the "start" entry is the time from there to New; only the Go runtime's
// own start, before any package initializes, is not counted. Everything is
// measured with the monotonic clock.
func New() *Trace {
	now := time.Now()
	t := &Trace{origin: gcpercent.Start}
	t.events = append(t.events, Event{Kind: KindProcess, Name: "start", DurationMS: ms(now.Sub(t.origin))})
	return t
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (t *Trace) add(e Event, start time.Time, end time.Time) {
	e.StartMS, e.DurationMS = ms(start.Sub(t.origin)), ms(end.Sub(start))
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.finished {
		t.events = append(t.events, e)
	}
}

// errCode is what Event.Error says of err.
func errCode(err error) string {
	if err == nil {
		return ""
	}
	if c := reason.CodeOf(err); c != "" {
		return string(c)
	}
	return "error"
}

// Stage is dispatch.Kernel.Trace: it records a stage, or an audit record
// write ("audit_decision", "audit_outcome"), that began at start and
// ended now.
func (t *Trace) Stage(what string, start time.Time, err error) {
	e := Event{Kind: KindStage, Name: what, Error: errCode(err)}
	if rec, ok := strings.CutPrefix(what, "audit_"); ok {
		e.Kind, e.Name = KindAudit, rec
	}
	t.add(e, start, time.Now())
}

// Launch is pluginhost.Options.Trace: it records the launch of the plugin
// key and gives its connection a stats handler that records each call.
func (t *Trace) Launch(key string) (func(error), []grpc.DialOption) {
	start := time.Now()
	end := func(err error) {
		t.add(Event{Kind: KindLaunch, Name: "launch", Plugin: key, Error: errCode(err)}, start, time.Now())
	}
	return end, []grpc.DialOption{grpc.WithStatsHandler(&callStats{t: t, key: key})}
}

// Finish adds the total and returns the events ordered by start (stages in
// pipeline order, as they run one after the other). Events reported after
// Finish are dropped.
func (t *Trace) Finish() []Event {
	end := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.finished {
		t.finished = true
		t.events = append(t.events, Event{Kind: KindTotal, Name: KindTotal, DurationMS: ms(end.Sub(t.origin))})
		slices.SortStableFunc(t.events, func(a, b Event) int {
			switch {
			case a.Kind == KindTotal || b.Kind == KindTotal:
				return boolCmp(a.Kind == KindTotal, b.Kind == KindTotal)
			case a.StartMS < b.StartMS:
				return -1
			case a.StartMS > b.StartMS:
				return 1
			}
			return 0
		})
	}
	return slices.Clone(t.events)
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// Print finishes the trace and writes it to w, one line per event.
func (t *Trace) Print(w io.Writer) { t.PrintAs(w, "agentnode: trace: ") }

// PrintAs is Print with each line starting with prefix instead of
// "agentnode: trace: " (`mcp serve --trace` names the call's request id
// in it). The lines go to w in one Write, so the traces of concurrent
// calls do not interleave.
func (t *Trace) PrintAs(w io.Writer, prefix string) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s%10s %10s  %s\n", prefix, "start_ms", "dur_ms", "event")
	for _, e := range t.Finish() {
		what := e.Kind + " " + e.Name
		if e.Kind == e.Name {
			what = e.Kind
		}
		if e.Plugin != "" {
			what = e.Kind + " " + e.Plugin
			if e.Kind == KindCall {
				what += " " + e.Name
			}
		}
		if e.Error != "" {
			what += " [" + e.Error + "]"
		}
		fmt.Fprintf(&b, "%s%10.3f %10.3f  %s\n", prefix, e.StartMS, e.DurationMS, what)
	}
	_, _ = io.WriteString(w, b.String())
}

// callStats is the gRPC stats handler of one plugin's connection. It
// records each call the host makes (not go-plugin's own services, whose
// methods are /plugin.*: the stdio stream and the controller), in the
// trace the call's context carries (WithTrace), else in t.
type callStats struct {
	t   *Trace
	key string
}

type methodKey struct{}

func (c *callStats) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, methodKey{}, info.FullMethodName)
}

func (c *callStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	end, ok := s.(*stats.End)
	if !ok {
		return
	}
	full, _ := ctx.Value(methodKey{}).(string)
	if full == "" || strings.HasPrefix(full, "/plugin.") {
		return
	}
	e := Event{Kind: KindCall, Name: full[strings.LastIndexByte(full, '/')+1:], Plugin: c.key}
	if end.Error != nil {
		e.Error = status.Code(end.Error).String()
	}
	t := c.t
	if ct, ok := ctx.Value(traceKey{}).(*Trace); ok {
		t = ct
	}
	if t != nil {
		t.add(e, end.BeginTime, end.EndTime)
	}
}

func (c *callStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (c *callStats) HandleConn(context.Context, stats.ConnStats) {}
