package dispatch

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/executor"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
)

// TestPlacement covers every trust tier under every host_trust_policy, and
// agents. A sandbox placement must end in a refusal here (the image is the
// placeholder), never on the host.
func TestPlacement(t *testing.T) {
	type want struct {
		placement string
		code      reason.Code
	}
	host := want{PlacementHost, ""}
	sandboxed := want{PlacementSandbox, reason.ImageUnpinned}
	cases := map[string]map[string]want{
		"curated_only": {"curated": host, "trusted": sandboxed, "verified": sandboxed, "unverified": sandboxed, "unknown": sandboxed},
		"default":      {"curated": host, "trusted": host, "verified": sandboxed, "unverified": sandboxed, "unknown": sandboxed},
		"none":         {"curated": sandboxed, "trusted": sandboxed, "verified": sandboxed, "unverified": sandboxed, "unknown": sandboxed},
	}
	for policy, tiers := range cases {
		for tier, w := range tiers {
			st := placementState(t, policy, tier, "toolpack", false)
			err := stagePlacement(context.Background(), st)
			if got := reason.CodeOf(err); got != w.code || st.res.Placement != w.placement {
				t.Errorf("%s/%s: placement %q code %q (%v), want %q %q", policy, tier, st.res.Placement, got, err, w.placement, w.code)
			}
		}
	}
	// Agents never run on the host and need the opt-in: a tier that would
	// place a toolpack on the host is host_agent_execution_unsupported, a
	// community tier agent_sandbox_disabled.
	for tier, want := range map[string]error{
		"curated": reason.ErrHostAgentExecutionUnsupported, "trusted": reason.ErrHostAgentExecutionUnsupported,
		"verified": reason.ErrAgentSandboxDisabled, "unknown": reason.ErrAgentSandboxDisabled,
	} {
		st := placementState(t, "default", tier, "agent", false)
		if err := stagePlacement(context.Background(), st); !errors.Is(err, want) {
			t.Errorf("agent %s without opt-in: %v, want %v", tier, err, want)
		}
		st = placementState(t, "default", tier, "agent", true)
		err := stagePlacement(context.Background(), st)
		if st.res.Placement != PlacementSandbox || !errors.Is(err, reason.ErrImageUnpinned) {
			t.Errorf("agent %s with opt-in: placement %q, %v", tier, st.res.Placement, err)
		}
	}
}

func placementState(t *testing.T, policy, tier, pkgType string, agentSandbox bool) *state {
	t.Helper()
	return &state{
		k: &Kernel{HomeDir: t.TempDir(), Executors: executor.Registry()},
		set: &settings{hostTrustPolicy: policy, hostConfinement: config.HostConfinementRequired, backend: "libcontainer",
			image: config.PlaceholderImage, agentSandboxEnabled: agentSandbox},
		pkg: &store.Package{ID: "p", Manifest: &manifest.Manifest{PackageID: "p", PackageType: pkgType, Runtime: "exec"}},
		res: &Result{Trust: tier, Placement: PlacementNone},
	}
}

// refusingHost is a host backend that cannot confine or has no python.
type refusingHost struct{ confine, python error }

func (h refusingHost) Confinement(string) (string, error) { return "", h.confine }
func (h refusingHost) Python() error                      { return h.python }

// TestPlacementAsksTheHostBackend: what placement knows of the host comes
// from the host backend wired into the kernel (Kernel.Executors.Host),
// and fails closed: no host backend, or one that would refuse the run,
// refuses the host placement with its code; placement never falls back to
// a sandbox for it. The sandbox placement does not ask the host.
func TestPlacementAsksTheHostBackend(t *testing.T) {
	st := placementState(t, "default", "curated", "toolpack", false)
	st.k.Executors = nil
	err := stagePlacement(context.Background(), st)
	if !errors.Is(err, reason.ErrSandboxUnavailable) || st.res.Placement != PlacementHost ||
		!strings.Contains(err.Error(), "no host backend") {
		t.Errorf("no host backend: placement %q, %v", st.res.Placement, err)
	}

	noConfine := reason.New(reason.SandboxUnavailable, "host_confinement required: landlock ABI 3 < 6")
	noPython := reason.New(reason.RuntimeUnsupported, "runtime python on the host needs /usr/bin/python3")
	for _, c := range []struct {
		runtime string
		host    refusingHost
		want    error
	}{
		{manifest.RuntimeExec, refusingHost{confine: noConfine}, noConfine},
		{manifest.RuntimePython, refusingHost{python: noPython}, noPython},
		{manifest.RuntimePython, refusingHost{confine: noConfine}, noConfine},
		{manifest.RuntimeExec, refusingHost{python: noPython}, nil},
	} {
		st := placementState(t, "default", "trusted", "toolpack", false)
		st.pkg.Manifest.Runtime = c.runtime
		reg := *st.k.Executors
		reg.Host = c.host
		st.k.Executors = &reg
		err := stagePlacement(context.Background(), st)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) || st.res.Placement != PlacementHost {
			t.Errorf("%s %+v: placement %q, %v, want %v", c.runtime, c.host, st.res.Placement, err, c.want)
		}
		sb := placementState(t, "default", "verified", "toolpack", false)
		sb.pkg.Manifest.Runtime = c.runtime
		sb.k.Executors = &reg
		sb.set.pythonImage = "agentnode/python@sha256:" + strings.Repeat("0", 64)
		if err := stagePlacement(context.Background(), sb); !errors.Is(err, reason.ErrImageUnpinned) {
			t.Errorf("sandboxed %s %+v: %v, want image_unpinned", c.runtime, c.host, err)
		}
	}
}

// TestPlacementPython: a `runtime: python` toolpack is placed like an exec
// one; sandboxed it needs sandbox.python_image (sandbox_unavailable naming
// the command that builds it when unset, never the host or the default
// image), and a runtime this version does not run for the package type is
// runtime_unsupported, not a policy decision.
func TestPlacementPython(t *testing.T) {
	st := placementState(t, "curated_only", "unknown", "toolpack", false)
	st.pkg.Manifest.Runtime = manifest.RuntimePython
	err := stagePlacement(context.Background(), st)
	if !errors.Is(err, reason.ErrSandboxUnavailable) || st.res.Placement != PlacementSandbox ||
		!strings.Contains(err.Error(), "agentnode sandbox build --python") {
		t.Errorf("python, no python image: placement %q, %v", st.res.Placement, err)
	}
	// Configured but only the placeholder digest: refused by the image check.
	st = placementState(t, "curated_only", "unknown", "toolpack", false)
	st.pkg.Manifest.Runtime = manifest.RuntimePython
	st.set.pythonImage = "agentnode/python@sha256:" + strings.Repeat("0", 64)
	if err := stagePlacement(context.Background(), st); !errors.Is(err, reason.ErrImageUnpinned) {
		t.Errorf("python, placeholder python image: %v", err)
	}
	// An image that is not there: sandbox_unavailable from image.Resolve.
	st = placementState(t, "curated_only", "unknown", "toolpack", false)
	st.pkg.Manifest.Runtime = manifest.RuntimePython
	st.set.pythonImage = "agentnode/python@sha256:" + strings.Repeat("1", 64)
	if err := stagePlacement(context.Background(), st); !errors.Is(err, reason.ErrSandboxUnavailable) || strings.Contains(err.Error(), "--python") {
		t.Errorf("python, missing python image: %v", err)
	}
	for _, c := range []struct{ pkgType, runtime string }{
		{manifest.TypeToolpack, manifest.RuntimeMCP}, {manifest.TypeToolpack, "ruby"}, {manifest.TypeAgent, "ruby"},
	} {
		st := placementState(t, "default", "curated", c.pkgType, true)
		st.pkg.Manifest.Runtime = c.runtime
		err := stagePlacement(context.Background(), st)
		if !errors.Is(err, reason.ErrRuntimeUnsupported) || errors.Is(err, reason.ErrPolicyDenied) || st.res.Placement != PlacementNone {
			t.Errorf("%s runtime %s: placement %q, %v", c.pkgType, c.runtime, st.res.Placement, err)
		}
	}
}

// TestPrestartHintFromTrustAnswer: whether the sandbox backend is started
// ahead (warm.go) follows the trust plugin's earlier answer for this very
// package, never a tier its attestations claim: a package claiming curated
// whose answer was unknown is hinted to the sandbox, one whose answer was
// curated is not, and the hint is kept per version and host trust policy.
func TestPrestartHintFromTrustAnswer(t *testing.T) {
	claimCurated := []byte(`{"trust_level":"curated","package_id":"p","version":"1.0.0"}`)
	for _, c := range []struct {
		answer, policy string
		want           bool
	}{
		{"unknown", "default", true},
		{"verified", "default", true},
		{"trusted", "curated_only", true},
		{"trusted", "default", false},
		{"curated", "curated_only", false},
	} {
		st := placementState(t, c.policy, c.answer, "toolpack", false)
		st.pkg.Version, st.pkg.ArtifactHash = "1.0.0", "sha256:"+strings.Repeat("a", 64)
		st.pkg.Attestations = [][]byte{claimCurated}
		st.set.trustPlugin = "attest"
		id, v, h := st.pkg.ID, st.pkg.Version, st.pkg.ArtifactHash
		if st.likelySandboxed(id, v, h, "toolpack") {
			t.Fatalf("%s/%s: hinted before any answer", c.answer, c.policy)
		}
		_ = stagePlacement(context.Background(), st)
		if got := st.likelySandboxed(id, v, h, "toolpack"); got != c.want {
			t.Errorf("answer %s, policy %s: likelySandboxed = %v, want %v", c.answer, c.policy, got, c.want)
		}
		if st.likelySandboxed(id, "2.0.0", h, "toolpack") {
			t.Errorf("answer %s, policy %s: the hint carried over to another version", c.answer, c.policy)
		}
		if c.want && c.policy == "default" {
			st.set.hostTrustPolicy = "curated_only"
			if st.likelySandboxed(id, v, h, "toolpack") {
				t.Errorf("answer %s: the hint carried over to another host_trust_policy", c.answer)
			}
		}
	}
	// Certain without any answer: agents, and host_trust_policy none.
	if st := placementState(t, "default", "", "agent", true); !st.likelySandboxed("p", "1", "h", "agent") {
		t.Error("an agent is not hinted to the sandbox")
	}
	if st := placementState(t, "none", "", "toolpack", false); !st.likelySandboxed("p", "1", "h", "toolpack") {
		t.Error("host_trust_policy none is not hinted to the sandbox")
	}
}

// TestHostEligible is placement's tier rule (TestPlacement runs it
// through stagePlacement).
func TestHostEligible(t *testing.T) {
	for _, c := range []struct {
		level, policy string
		want          bool
	}{
		{"curated", "default", true}, {"curated", "curated_only", true}, {"curated", "none", false},
		{"trusted", "default", true}, {"trusted", "curated_only", false}, {"trusted", "none", false},
		{"verified", "default", false}, {"unverified", "default", false}, {"unknown", "default", false}, {"", "default", false},
	} {
		if got := hostEligible(c.level, c.policy); got != c.want {
			t.Errorf("hostEligible(%q, %q) = %v, want %v", c.level, c.policy, got, c.want)
		}
	}
}

// TestPlacementRuntime: a sandbox placement chooses the runtime from the
// tier (sandbox.runtime_by_trust over sandbox.runtime, native by default),
// before anything can refuse it, so that a refusal's record says which
// runtime was asked for; a host placement has none.
func TestPlacementRuntime(t *testing.T) {
	by := map[string]string{"unknown": "gvisor", "verified": "native"}
	for _, c := range []struct {
		tier, def, want string
		byTrust         map[string]string
	}{
		{"unknown", "", "gvisor", by},
		{"verified", "gvisor", "native", by},
		{"unverified", "", "native", by},
		{"unverified", "gvisor", "gvisor", by},
		{"unknown", "", "native", nil},
		{"curated", "gvisor", "", by}, // host
	} {
		st := placementState(t, "curated_only", c.tier, "toolpack", false)
		st.set.sandboxRuntime, st.set.runtimeByTrust = c.def, c.byTrust
		st.k.Executors.Host = refusingHost{}
		_ = stagePlacement(context.Background(), st)
		if st.res.Runtime != c.want {
			t.Errorf("tier %s, runtime %q, by trust %v: chose %q, want %q", c.tier, c.def, c.byTrust, st.res.Runtime, c.want)
		}
	}
}
