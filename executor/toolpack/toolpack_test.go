package toolpack

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/executor/backend"
	"github.com/agentnode/agentnode/executor/confine"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
)

// hostPlan is a plan of a host run of a tool whose entrypoint is script.
func hostPlan(t *testing.T, script string) *plan.Plan {
	t.Helper()
	return hostPlanRaw(t, "#!/bin/sh\ncat >/dev/null\n"+script)
}

// hostPlanRaw is hostPlan with the whole entrypoint file.
func hostPlanRaw(t *testing.T, file string) *plan.Plan {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "tool"), []byte(file), 0o755); err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{PackageID: "p", PackageType: manifest.TypeToolpack, Runtime: manifest.RuntimeExec}
	return &plan.Plan{
		RequestID: "r1", Package: &store.Package{ID: "p", Dir: dir, Manifest: m},
		Tool:  &manifest.Tool{Name: "t", Entrypoint: "bin/tool"},
		Input: []byte(`{"x":1}`), Placement: plan.PlacementHost,
		Timeout: time.Minute, Environ: []string{"PATH=/usr/bin:/bin", "SECRET=1"}, HostConfinement: confine.ModeBestEffort,
	}
}

// TestExecuteOutcomes: the tool I/O protocol's answers become the outcome;
// a tool that fails is OK false, not an error.
func TestExecuteOutcomes(t *testing.T) {
	for _, c := range []struct {
		name, script string
		ok           bool
		output, msg  string
	}{
		{"ok", `echo '{"ok":true,"result":{"y":2}}'`, true, `{"y":2}`, ""},
		{"tool error", `echo '{"ok":false,"error":"no such thing"}'`, false, "", "no such thing"},
		{"ok but exit 1", "echo '{\"ok\":true,\"result\":1}'\nexit 1", false, "1", "tool reported ok but exited non-zero"},
		{"not the protocol", `echo hello`, false, "", "tool output violates the tool I/O protocol"},
		{"flood", `head -c 5000000 /dev/zero`, false, "", "tool output exceeded"},
		{"no host secrets", `if [ -n "$SECRET" ]; then echo '{"ok":false,"error":"leak"}'; else echo '{"ok":true,"result":0}'; fi`, true, "0", ""},
	} {
		out := &plan.Outcome{}
		err := Executor{}.Execute(context.Background(), hostPlan(t, c.script), out)
		if err != nil || !out.Ran || out.OK == nil || *out.OK != c.ok || string(out.Output) != c.output ||
			!strings.Contains(out.Error, c.msg) || out.DurationMS == nil {
			t.Errorf("%s: %+v %v", c.name, out, err)
		}
	}
}

// TestExecuteSendsTheRequest: the tool reads the decided request, one line
// of the tool I/O protocol, on its stdin.
func TestExecuteSendsTheRequest(t *testing.T) {
	p := hostPlanRaw(t, "#!/bin/sh\nread -r req\nprintf '{\"ok\":true,\"result\":{\"request\":%s}}\\n' \"$req\"\n")
	out := &plan.Outcome{}
	if err := (Executor{}).Execute(context.Background(), p, out); err != nil || out.OK == nil || !*out.OK ||
		string(out.Output) != `{"request":{"tool":"t","input":{"x":1}}}` {
		t.Fatalf("%+v %v %s", out, err, out.Output)
	}
}

// TestExecuteTimeout: a tool past its timeout is stopped and the run is a
// timeout, with the exit the backend reported.
func TestExecuteTimeout(t *testing.T) {
	p := hostPlan(t, "exec sleep 60")
	p.Timeout = 100 * time.Millisecond
	out := &plan.Outcome{}
	err := Executor{}.Execute(context.Background(), p, out)
	if !errors.Is(err, reason.ErrTimeout) || !strings.Contains(err.Error(), "tool p/t timed out") || !out.Ran || *out.OK {
		t.Fatalf("%+v %v", out, err)
	}
}

// TestExecuteBuildsTheBackend: the executor runs the plan on the backend
// it builds for the plan's placement; a placement it cannot build one for
// (a sandbox placement without the backend client the placement stage
// checked) fails closed, sandbox_unavailable, before anything runs or
// goes into the outcome: what the kernel did when it built the backend.
func TestExecuteBuildsTheBackend(t *testing.T) {
	p := hostPlan(t, `echo '{"ok":true,"result":1}'`)
	var built []string
	e := Executor{backends: func(p *plan.Plan) (backend.Backend, error) {
		built = append(built, p.Placement)
		return backend.For(p)
	}}
	out := &plan.Outcome{}
	if err := e.Execute(context.Background(), p, out); err != nil || !out.Ran || string(out.Output) != "1" ||
		len(built) != 1 || built[0] != plan.PlacementHost {
		t.Fatalf("host: %+v %v, built %q", out, err, built)
	}

	p.Placement, p.BackendName = plan.PlacementSandbox, "libcontainer"
	out = &plan.Outcome{}
	err := Executor{}.Execute(context.Background(), p, out)
	if !errors.Is(err, reason.ErrSandboxUnavailable) || !strings.Contains(err.Error(), "no sandbox backend was placed") || !reflect.DeepEqual(*out, plan.Outcome{}) {
		t.Fatalf("sandbox without a client: %v, outcome %+v", err, out)
	}
}
