package sandbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// gvisorBackend is memBackend with RuntimeSupport: it confirms gVisor in
// its availability answer unless lie is set (then it claims native).
type gvisorBackend struct {
	*memBackend
	lie bool
}

func (g *gvisorBackend) SupportsRuntime(rt string) bool { return rt == sandbox.RuntimeGVisor }

func (g *gvisorBackend) Availability(ctx context.Context, req *sandbox.AvailabilityRequest) (*sandbox.AvailabilityResponse, error) {
	resp, err := g.memBackend.Availability(ctx, req)
	if err == nil && resp.Available && !g.lie {
		resp.Runtime = req.Runtime
	}
	return resp, err
}

// TestRuntimeNeverDowngraded: a backend that knows nothing of runtimes
// answers gVisor availability with runtime_missing and never sees a gVisor
// run; one that does not confirm gVisor is unavailable for it too; one that
// supports it gets the runtime in its spec.
func TestRuntimeNeverDowngraded(t *testing.T) {
	ctx := t.Context()
	gv := &sandbox.AvailabilityRequest{Image: "img@sha256:00", Runtime: sandbox.RuntimeGVisor}

	plain := newMemBackend()
	c := sandboxtest.Connect(t, info, plain)
	got, err := c.Availability(ctx, gv)
	if err != nil || got.Available || got.Reason != sandbox.ReasonRuntimeMissing {
		t.Fatalf("runtime-unaware backend: %+v, %v; want runtime_missing", got, err)
	}
	if got, err := c.Availability(ctx, &sandbox.AvailabilityRequest{Image: "img@sha256:00"}); err != nil || !got.Available {
		t.Fatalf("native availability: %+v, %v", got, err)
	}
	_, err = c.Run(ctx, &sandbox.RunRequest{Spec: sandbox.Spec{RunID: "r1", Args: []string{"exit", "0"}, Runtime: sandbox.RuntimeGVisor}})
	plain.mu.Lock()
	ran := plain.spec.RunID
	plain.mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), sandbox.ReasonRuntimeMissing) || ran != "" {
		t.Fatalf("gVisor run on a runtime-unaware backend: %v, backend ran %q; want refused before the backend", err, ran)
	}
	if _, err := c.Run(ctx, &sandbox.RunRequest{Spec: sandbox.Spec{RunID: "r2", Args: []string{"exit", "0"}, Runtime: "firecracker"}}); err == nil {
		t.Fatal("unknown runtime accepted")
	}

	liar := &gvisorBackend{memBackend: newMemBackend(), lie: true}
	c = sandboxtest.Connect(t, info, liar)
	if got, err := c.Availability(ctx, gv); err != nil || got.Available || got.Reason != sandbox.ReasonRuntimeMissing {
		t.Fatalf("backend not confirming gVisor: %+v, %v; want runtime_missing", got, err)
	}

	ok := &gvisorBackend{memBackend: newMemBackend()}
	c = sandboxtest.Connect(t, info, ok)
	if got, err := c.Availability(ctx, gv); err != nil || !got.Available || got.Runtime != sandbox.RuntimeGVisor {
		t.Fatalf("gVisor backend: %+v, %v; want available, gvisor", got, err)
	}
	if _, err := c.Run(ctx, &sandbox.RunRequest{Spec: sandbox.Spec{RunID: "r3", Args: []string{"exit", "0"}, Runtime: sandbox.RuntimeGVisor}}); err != nil {
		t.Fatal(err)
	}
	ok.mu.Lock()
	rt := ok.spec.Runtime
	ok.mu.Unlock()
	if rt != sandbox.RuntimeGVisor {
		t.Fatalf("backend got runtime %q, want gvisor", rt)
	}
}

func TestRuntimeFor(t *testing.T) {
	by := map[string]string{"unknown": "gvisor", "verified": "native"}
	for _, c := range []struct{ tier, def, want string }{
		{"unknown", "", "gvisor"},
		{"verified", "gvisor", "native"},
		{"unverified", "", "native"},
		{"unverified", "gvisor", "gvisor"},
		{"", "", "native"},
	} {
		if got := sandbox.RuntimeFor(c.tier, c.def, by); got != c.want {
			t.Errorf("RuntimeFor(%q, %q) = %q, want %q", c.tier, c.def, got, c.want)
		}
	}
}
