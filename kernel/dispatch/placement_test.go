package dispatch

import (
	"context"
	"errors"
	"strings"
	"testing"

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
		k: &Kernel{HomeDir: t.TempDir()},
		set: &settings{hostTrustPolicy: policy, hostConfinement: config.HostConfinementRequired, backend: "libcontainer",
			image: config.PlaceholderImage, agentSandboxEnabled: agentSandbox},
		pkg: &store.Package{ID: "p", Manifest: &manifest.Manifest{PackageID: "p", PackageType: pkgType, Runtime: "exec"}},
		res: &Result{Trust: tier, Placement: PlacementNone},
	}
}

func TestCappedBuffer(t *testing.T) {
	c := &cappedBuffer{max: 5}
	if n, err := c.Write([]byte("abc")); n != 3 || err != nil {
		t.Fatal(n, err)
	}
	if _, err := c.Write([]byte("defg")); !errors.Is(err, errOutputLimit) || !c.exceeded || string(c.Bytes()) != "abcde" {
		t.Fatalf("stdout cap: err=%v exceeded=%v %q", err, c.exceeded, c.Bytes())
	}
	d := &cappedBuffer{max: 2, drop: true}
	if n, err := d.Write([]byte("xyz")); n != 3 || err != nil || string(d.Bytes()) != "xy" {
		t.Fatalf("stderr cap: %d %v %q", n, err, d.Bytes())
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
