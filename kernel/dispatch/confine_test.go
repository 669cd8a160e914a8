package dispatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/auditverify"
	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/cmd/agentnode/pkginstall"
	"github.com/agentnode/agentnode/executor/backend"
	"github.com/agentnode/agentnode/executor/confine"
	"github.com/agentnode/agentnode/executor/confine/confinetest"
	"github.com/agentnode/agentnode/executor/hostexec"
	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/trust"
)

const confineTestManifest = `manifest_version: "0.2"
package_id: host-tools
package_type: toolpack
name: Host tools
publisher: acme
version: 1.0.0
summary: For the host confinement tests.
runtime: exec
capabilities:
  tools:
    - name: hello
      description: Says hello.
      entrypoint: bin/hello
      action_type: read
      input_schema: {type: object}
permissions:
  network: {level: none}
  filesystem: {level: none}
  code_execution: {level: none}
`

// confineHome is a set-up home with host-tools installed, the given
// sandbox.host_confinement, and a pipeline that runs every real stage but
// the trust plugin, which is replaced by a curated verdict (so placement
// is the host), and the inspector plugins.
func confineHome(t *testing.T, mode string) *Kernel {
	t.Helper()
	k := newHome(t)
	if err := configedit.Set(home.ConfigPath(k.HomeDir), "sandbox.host_confinement", mode); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "agentnode.yaml"), []byte(confineTestManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(src, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	tool := "#!/bin/sh\ncat >/dev/null\necho '{\"ok\":true,\"result\":\"hello\"}'\n"
	if err := os.WriteFile(filepath.Join(src, "bin", "hello"), []byte(tool), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := pkginstall.Open(home.PackagesDir(k.HomeDir)).Install(src, nil); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTNODE_LOCKFILE", filepath.Join(t.TempDir(), "agentnode.lock"))
	k.Environ = []string{"PATH=/usr/bin:/bin"}
	var stages []stage
	for _, s := range decisionStages {
		switch s.name {
		case "trust":
			s.run = func(_ context.Context, st *state) error { st.res.Trust = trust.LevelCurated; return nil }
		case "inspectors":
			continue
		}
		stages = append(stages, s)
	}
	withStages(t, stages...)
	return k
}

// abiHost is the host backend's answers on a kernel with Landlock ABI abi
// (and seccomp): hostexec's own assessment, of another readiness.
type abiHost struct {
	backend.Host
	abi int
}

func (h abiHost) Confinement(mode string) (string, error) {
	a, err := hostexec.AssessConfinement(confine.Readiness{LandlockABI: h.abi}, mode)
	return a.Note, err
}

// withKernelABI makes k's placement see a kernel with the given Landlock
// ABI; the host backend that runs the tool still checks the real one.
func withKernelABI(k *Kernel, abi int) {
	reg := *k.Executors
	reg.Host = abiHost{abi: abi}
	k.Executors = &reg
}

func auditRecords(t *testing.T, k *Kernel) []audit.Record {
	t.Helper()
	recs, err := auditverify.Tail(home.AuditDir(k.HomeDir), 100)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestHostConfinementRequiredRefusesBeforeDeciding: with required and too
// little Landlock, the run is refused at placement: the audit log holds a
// single record, a deny with sandbox_unavailable and the executor's own
// message; no record ever says allow and nothing runs. A dry run (guard
// check) refuses the same way.
func TestHostConfinementRequiredRefusesBeforeDeciding(t *testing.T) {
	for _, abi := range []int{0, 3, confine.MinABI - 1} {
		k := confineHome(t, confine.ModeRequired)
		withKernelABI(k, abi)
		_, wantErr := hostexec.AssessConfinement(confine.Readiness{LandlockABI: abi}, confine.ModeRequired)

		dry, err := k.Run(context.Background(), &Request{Package: "host-tools", Tool: "hello", Input: []byte(`{}`), DryRun: true})
		if !errors.Is(err, reason.ErrSandboxUnavailable) || dry.Decision != "deny" || dry.Placement != PlacementHost {
			t.Fatalf("ABI %d dry run: %+v %v", abi, dry, err)
		}

		res, err := k.Run(context.Background(), &Request{Package: "host-tools", Tool: "hello", Input: []byte(`{}`)})
		if !errors.Is(err, reason.ErrSandboxUnavailable) || !errors.Is(err, confine.ErrUnavailable) {
			t.Fatalf("ABI %d: %v", abi, err)
		}
		if res.Ran || res.Decision != "deny" || res.Code != string(reason.SandboxUnavailable) {
			t.Fatalf("ABI %d: result %+v", abi, res)
		}
		if !strings.Contains(err.Error(), wantErr.Error()) || !strings.Contains(err.Error(), "host_confinement") {
			t.Fatalf("ABI %d: %q is not the executor's message %q", abi, err, wantErr)
		}
		recs := auditRecords(t, k)
		if len(recs) != 1 {
			t.Fatalf("ABI %d: %d audit records, want one deny: %+v", abi, len(recs), recs)
		}
		r := recs[0]
		if r.Event != "decision" || r.Decision != "deny" || r.Code != string(reason.SandboxUnavailable) ||
			r.Placement != PlacementHost || r.RequestID != res.RequestID || !strings.Contains(r.Reason, wantErr.Error()) {
			t.Fatalf("ABI %d: audit record %+v", abi, r)
		}
	}
}

// TestHostConfinementBestEffortNotes: with best_effort and too little
// Landlock the run goes ahead, and the decision record that allows it
// already says how it will be confined; the outcome follows.
func TestHostConfinementBestEffortNotes(t *testing.T) {
	for abi, note := range map[int]string{0: "unconfined: landlock unavailable", 3: "partly confined: landlock ABI 3 < 6"} {
		k := confineHome(t, confine.ModeBestEffort)
		withKernelABI(k, abi)
		res, err := k.Run(context.Background(), &Request{Package: "host-tools", Tool: "hello", Input: []byte(`{}`)})
		if err != nil || !res.Ran || res.OK == nil || !*res.OK || res.Placement != PlacementHost {
			t.Fatalf("ABI %d: %+v %v", abi, res, err)
		}
		if !strings.Contains(strings.Join(res.Warnings, "\n"), "host tool host-tools/hello: "+note) {
			t.Fatalf("ABI %d: warnings %q", abi, res.Warnings)
		}
		recs := auditRecords(t, k)
		if len(recs) != 2 {
			t.Fatalf("ABI %d: %d audit records, want decision and outcome: %+v", abi, len(recs), recs)
		}
		d, o := recs[0], recs[1]
		if d.Event != "decision" || d.Decision != "allow" || d.Placement != PlacementHost || d.Reason != note {
			t.Fatalf("ABI %d: decision record %+v, want allow with %q", abi, d, note)
		}
		if o.Event != "outcome" || o.RequestID != d.RequestID || o.ExitCode == nil || *o.ExitCode != 0 {
			t.Fatalf("ABI %d: outcome record %+v", abi, o)
		}
		// The executor checked again against the real kernel, and the
		// outcome says what it found (no note where it confined fully).
		real, err := hostexec.CheckConfinement(confine.ModeBestEffort)
		if err != nil {
			t.Fatal(err)
		}
		want := real.Note
		if o.Reason != want {
			t.Fatalf("ABI %d: outcome reason %q, want %q", abi, o.Reason, want)
		}
	}
}

// TestHostConfinementFullNoNote: on a kernel that confines fully, nothing
// is noted anywhere, in either mode.
func TestHostConfinementFullNoNote(t *testing.T) {
	for _, mode := range []string{confine.ModeRequired, confine.ModeBestEffort} {
		k := confineHome(t, mode)
		withKernelABI(k, confine.MinABI)
		confinetest.Require(t) // the executor checks the real kernel
		res, err := k.Run(context.Background(), &Request{Package: "host-tools", Tool: "hello", Input: []byte(`{}`)})
		if err != nil || !res.Ran || len(res.Warnings) != 0 || res.Reason != "" {
			t.Fatalf("%s: %+v %v", mode, res, err)
		}
		for _, r := range auditRecords(t, k) {
			if r.Reason != "" {
				t.Fatalf("%s: %s record reason %q", mode, r.Event, r.Reason)
			}
		}
	}
}

// TestNoExecutorFailsClosed: a kernel into which no executor for the
// package type is wired decides as always, records the decision, runs
// nothing and records the failure (plugin_unavailable).
func TestNoExecutorFailsClosed(t *testing.T) {
	k := confineHome(t, confine.ModeBestEffort)
	withKernelABI(k, confine.MinABI)
	k.Executors = &plan.Registry{Host: k.Executors.Host}
	res, err := k.Run(context.Background(), &Request{Package: "host-tools", Tool: "hello", Input: []byte(`{}`)})
	if !errors.Is(err, reason.ErrPluginUnavailable) || res.Ran || res.Decision != "allow" || !strings.Contains(err.Error(), "no executor") {
		t.Fatalf("%+v %v", res, err)
	}
	recs := auditRecords(t, k)
	if len(recs) != 2 || recs[0].Event != "decision" || recs[1].Event != "outcome" || recs[1].Code != string(reason.PluginUnavailable) {
		t.Fatalf("records %+v", recs)
	}
}
