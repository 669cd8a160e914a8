package confine

import (
	"errors"
	"strings"
	"testing"
)

// TestProbe: the probe reports this kernel as it is, caches it, and a
// filter program is ready for both network settings.
func TestProbe(t *testing.T) {
	r := Probe()
	if r.LandlockABI != LandlockABI() {
		t.Fatalf("Probe Landlock ABI %d, kernel says %d", r.LandlockABI, LandlockABI())
	}
	if r.Seccomp != nil {
		t.Fatalf("seccomp unavailable on a cgo build on this kernel: %v", r.Seccomp)
	}
	if r2 := Probe(); r2 != r {
		t.Fatalf("probe not stable: %+v then %+v", r, r2)
	}
	for _, network := range []bool{false, true} {
		if p, err := filterProgram(network); err != nil || len(p) == 0 {
			t.Fatalf("filter program (network %v) after the probe: %d instructions, %v", network, len(p), err)
		}
	}
}

// TestReadinessAssess: without seccomp nothing runs in either mode; with
// it, Landlock decides as Assess does.
func TestReadinessAssess(t *testing.T) {
	noSeccomp := Readiness{LandlockABI: 7, Seccomp: ErrSeccompUnavailable}
	for _, mode := range []string{ModeRequired, ModeBestEffort} {
		_, err := noSeccomp.Assess(mode)
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrSeccompUnavailable) {
			t.Errorf("%s without seccomp: %v", mode, err)
		}
	}
	if _, err := noSeccomp.Assess("off"); err == nil || !strings.Contains(err.Error(), "unknown host_confinement mode") {
		t.Errorf("unknown mode without seccomp: %v", err)
	}
	for _, abi := range []int{0, 3, MinABI, 9} {
		r := Readiness{LandlockABI: abi}
		for _, mode := range []string{ModeRequired, ModeBestEffort} {
			got, err := r.Assess(mode)
			want, werr := Assess(mode, abi)
			if got != want || (err == nil) != (werr == nil) {
				t.Errorf("ABI %d %s: %+v %v, want %+v %v", abi, mode, got, err, want, werr)
			}
		}
	}
}
