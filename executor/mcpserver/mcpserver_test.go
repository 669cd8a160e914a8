package mcpserver

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
)

// The Guard proxy's hook forwards only the call the pipeline decided.
func TestForwardDecided(t *testing.T) {
	ctx := context.WithValue(context.Background(), decidedKey{}, decidedCall{"echo", []byte(`{"x":1}`)})
	if err := forwardDecided(ctx, "echo", json.RawMessage(`{ "x" : 1 }`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ctx  context.Context
		tool string
		args string
	}{
		{context.Background(), "echo", `{"x":1}`},
		{ctx, "other", `{"x":1}`},
		{ctx, "echo", `{"x":2}`},
		{ctx, "echo", `{"x":1,"y":2}`},
	} {
		if err := forwardDecided(c.ctx, c.tool, json.RawMessage(c.args)); reason.CodeOf(err) != reason.PolicyDenied {
			t.Errorf("%s %s: %v", c.tool, c.args, err)
		}
	}
}

// egressCounter is plan.Services that counts the sealed egress audits
// asked for (any other method is not expected).
type egressCounter struct {
	plan.Services
	asked int
}

func (c *egressCounter) EgressAudit([]string) (plan.EgressAudit, error) {
	c.asked++
	return nil, reason.New(reason.AuditUnavailable, "not in this test")
}

// Sealed egress is never started for a server on the host: the session is
// refused (egress_denied) before the kernel is asked to audit a proxy and
// before any process starts.
func TestEgressOnHostRefused(t *testing.T) {
	svc := &egressCounter{}
	ran := false
	p := &plan.Plan{RequestID: "r", Package: &store.Package{ID: "p", Dir: t.TempDir()}, Tool: &manifest.Tool{Name: "echo"},
		Placement: plan.PlacementHost, Backend: backendFunc(func() { ran = true }), Timeout: time.Second, Services: svc,
		MCP: &plan.MCPLaunch{Command: &manifest.MCPCommand{Path: "bin/server"}, Domains: []string{"api.example.com"},
			Declared: map[string]string{"echo": "echo"}}}
	out := &plan.Outcome{}
	err := Executor{}.Execute(context.Background(), p, out)
	if reason.CodeOf(err) != reason.EgressDenied || svc.asked != 0 || ran || out.Ran {
		t.Fatalf("%v (audit asked %d times, backend ran %v, outcome %+v)", err, svc.asked, ran, out)
	}
}

// backendFunc is a backend that notes it was asked to run and runs
// nothing.
type backendFunc func()

func (f backendFunc) Run(context.Context, *plan.Task) (*plan.Exit, error) {
	f()
	return nil, reason.New(reason.SandboxUnavailable, "not in this test")
}
