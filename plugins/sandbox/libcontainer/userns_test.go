package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/subid"
)

// TestNoReservationUnavailable: without agentnode's subordinate ids the
// backend is unavailable, saying to run `agentnode setup`, and refuses to
// run (never without the namespace).
func TestNoReservationUnavailable(t *testing.T) {
	b, fx := setup(t)
	b.subuidFile = filepath.Join(t.TempDir(), "subuid") // missing
	resp, err := b.Availability(t.Context(), &sandbox.AvailabilityRequest{Image: fx.Image, ImageStore: fx.Store})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Available || resp.Reason != sandbox.ReasonNotInstalled || !strings.Contains(resp.Detail, "agentnode setup") {
		t.Fatalf("Availability without a reservation = %+v", resp)
	}
	id := newID(t, b, "nores")
	if _, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: spec(fx, id, "true")}); !errors.Is(err, subid.ErrNoReservation) {
		t.Fatalf("Run without a reservation: %v", err)
	}
	assertNoLeftovers(t, b, fx, id)
}

// TestSlots: slots are distinct while held, come back when released, and
// a reservation with every slot held refuses.
func TestSlots(t *testing.T) {
	b := newBackend(nil)
	b.stateRoot = filepath.Join(t.TempDir(), "state")
	r := subid.Range{Start: 200000, Count: 4} // two slots
	s1, err := b.acquireSlot(r)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := b.acquireSlot(r)
	if err != nil {
		t.Fatal(err)
	}
	if s1.host == s2.host || (s1.host != 200000 && s1.host != 200002) || (s2.host != 200000 && s2.host != 200002) {
		t.Fatalf("slots at %d and %d", s1.host, s2.host)
	}
	if _, err := b.acquireSlot(r); !errors.Is(err, errNoFreeSlot) {
		t.Fatalf("a third slot of two: %v", err)
	}
	s1.release()
	s3, err := b.acquireSlot(r)
	if err != nil || s3.host != s1.host {
		t.Fatalf("after a release: %v, %v", s3, err)
	}
	s2.release()
	s3.release()
	m := s3.mappings()
	if len(m) != 2 || m[0].ContainerID != 0 || m[0].HostID != int64(s3.host) || m[1].ContainerID != sandboxID || m[1].HostID != int64(s3.host)+1 {
		t.Errorf("mappings %+v", m)
	}
	if _, err := b.acquireSlot(subid.Range{Start: 200000, Count: 1}); err == nil {
		t.Error("a reservation of one id gave a slot")
	}
}

// TestUserNamespace: the run's process is uid 1000 inside, in a user
// namespace that maps container root and it, each onto one host id of the
// reservation, and nothing else.
func TestUserNamespace(t *testing.T) {
	b, fx := setup(t)
	ids, err := b.reservation()
	if err != nil {
		t.Fatal(err)
	}
	id := newID(t, b, "userns")
	resp, out, errOut := run(t, b, spec(fx, id, "sh", "-c", "id -u; cat /proc/self/uid_map /proc/self/gid_map"), nil)
	if resp.ExitCode != 0 {
		t.Fatalf("exit %d stdout %q stderr %q", resp.ExitCode, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || lines[0] != "1000" {
		t.Fatalf("stdout %q", out)
	}
	for _, l := range lines[1:] {
		var in, host, n uint64
		if f := strings.Fields(l); len(f) != 3 {
			t.Fatalf("map line %q", l)
		}
		if _, err := fmt.Sscan(l, &in, &host, &n); err != nil {
			t.Fatal(err)
		}
		if n != 1 || (in != 0 && in != 1000) || host < uint64(ids.Start) || host >= ids.End() {
			t.Errorf("map line %q: want 0 or 1000 onto one id of %s", l, ids)
		}
	}
	assertNoLeftovers(t, b, fx, id)
	if entries, err := os.ReadDir(b.rootsDir()); err != nil || len(entries) != 0 {
		t.Errorf("run roots left behind: %v (%v)", entries, err)
	}
}
