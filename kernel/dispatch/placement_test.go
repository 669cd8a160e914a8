package dispatch

import (
	"context"
	"errors"
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
