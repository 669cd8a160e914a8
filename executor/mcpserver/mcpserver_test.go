package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/executor/backend"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/sdk/sandbox"
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

func (c *egressCounter) EgressAudit() (*plan.EgressAudit, error) {
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
		Placement: plan.PlacementHost, Timeout: time.Second, Services: svc,
		MCP: &plan.MCPLaunch{Command: &manifest.MCPCommand{Path: "bin/server"}, Domains: []string{"api.example.com"},
			Declared: map[string]string{"echo": "echo"}}}
	out := &plan.Outcome{}
	e := Executor{backends: func(*plan.Plan) (backend.Backend, error) { return backendFunc(func() { ran = true }), nil }}
	err := e.Execute(context.Background(), p, out)
	if reason.CodeOf(err) != reason.EgressDenied || svc.asked != 0 || ran || out.Ran {
		t.Fatalf("%v (audit asked %d times, backend ran %v, outcome %+v)", err, svc.asked, ran, out)
	}
}

// backendFunc is a backend that notes it was asked to run and runs
// nothing.
type backendFunc func()

func (f backendFunc) Run(context.Context, *backend.Task) (*backend.Exit, error) {
	f()
	return nil, reason.New(reason.SandboxUnavailable, "not in this test")
}

// taskBackend records the task it was asked to run and runs nothing.
type taskBackend struct{ got *backend.Task }

func (b *taskBackend) Run(_ context.Context, t *backend.Task) (*backend.Exit, error) {
	b.got = t
	return nil, reason.New(reason.SandboxUnavailable, "not in this test")
}

// The granted workspace goes to the server's task, on either placement,
// and a kept server is reused only for calls with the same grant.
func TestWorkspaceReachesServer(t *testing.T) {
	for _, placement := range []string{plan.PlacementSandbox, plan.PlacementHost} {
		for _, ws := range []*sandbox.Workspace{nil, {Path: "/home/u/p"}, {Path: "/home/u/p", Writable: true}} {
			b := &taskBackend{}
			p := &plan.Plan{RequestID: "r", Package: &store.Package{ID: "p", Dir: t.TempDir()}, Tool: &manifest.Tool{Name: "echo"},
				Placement: placement, Timeout: time.Second, Workspace: ws, Image: plan.Image{Ref: "img@sha256:0"},
				MCP: &plan.MCPLaunch{Command: &manifest.MCPCommand{Path: "/pack/bin/server"}, Declared: map[string]string{"echo": "echo"}}}
			_, _ = runServer(context.Background(), p, b, time.Second, "", nil, io.Discard, io.Discard)
			if b.got == nil || !reflect.DeepEqual(b.got.Workspace, ws) {
				t.Errorf("%s, workspace %+v: the server's task has %+v", placement, ws, b.got)
			}
		}
	}
	key := func(ws *sandbox.Workspace) string {
		return launchKey(&plan.Plan{Package: &store.Package{ID: "p"}, Placement: plan.PlacementSandbox, Workspace: ws,
			MCP: &plan.MCPLaunch{Command: &manifest.MCPCommand{Path: "/pack/bin/server"}}})
	}
	keys := map[string]bool{key(nil): true, key(&sandbox.Workspace{Path: "/a"}): true,
		key(&sandbox.Workspace{Path: "/a", Writable: true}): true, key(&sandbox.Workspace{Path: "/b"}): true}
	if len(keys) != 4 {
		t.Errorf("launchKey does not tell the workspace grants apart: %d distinct keys of 4", len(keys))
	}
}

// A sandbox placement without the backend client the placement stage
// checked has no backend: the call fails closed, sandbox_unavailable,
// before a server starts or anything goes into the outcome, on a server
// started per call and on a kept one alike (what the kernel did when it
// built the backend).
func TestNoBackendNoServer(t *testing.T) {
	p := &plan.Plan{RequestID: "r", Package: &store.Package{ID: "p", Dir: t.TempDir()}, Tool: &manifest.Tool{Name: "echo"},
		Placement: plan.PlacementSandbox, BackendName: "libcontainer", Timeout: time.Second,
		Image: plan.Image{Ref: "img@sha256:0"},
		MCP:   &plan.MCPLaunch{Command: &manifest.MCPCommand{Path: "/pack/bin/server"}, Declared: map[string]string{"echo": "echo"}}}
	servers := NewServers()
	defer servers.Close()
	for _, ex := range []plan.Executor{Executor{}, servers} {
		out := &plan.Outcome{}
		err := ex.Execute(context.Background(), p, out)
		if reason.CodeOf(err) != reason.SandboxUnavailable || !strings.Contains(err.Error(), "no sandbox backend was placed") ||
			!reflect.DeepEqual(*out, plan.Outcome{}) {
			t.Errorf("%T: %v, outcome %+v", ex, err, out)
		}
	}
	if n := servers.Running(); n != 0 {
		t.Errorf("%d servers running", n)
	}
}
