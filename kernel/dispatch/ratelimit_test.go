package dispatch

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/ratelimit"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
)

// rateLimitPipeline is config → a stage that stands in for the package
// stages → the real rate-limit stage, with execution replaced by a counter.
func rateLimitPipeline(t *testing.T, k *Kernel, pkgType string) *int {
	t.Helper()
	withStages(t,
		stage{name: "config", code: reason.ConfigInvalid, run: stageConfig},
		stage{name: "package", code: reason.ArtifactMismatch, run: func(_ context.Context, st *state) error {
			st.pkg = &store.Package{ID: "acme-pack", Version: "1.0.0",
				Manifest: &manifest.Manifest{PackageID: "acme-pack", PackageType: pkgType, Runtime: "exec"}}
			return nil
		}},
		stage{name: "rate_limit", code: reason.RateLimited, run: stageRateLimit})
	ran := 0
	saved := executeStage
	executeStage = stage{name: "execute", code: reason.PluginUnavailable, run: func(context.Context, *state) error {
		ran++
		return nil
	}}
	t.Cleanup(func() { executeStage = saved })
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	k.Now = func() time.Time { return now }
	k.StageTimeout = 5 * time.Second
	return &ran
}

func setConfig(t *testing.T, k *Kernel, key, value string) {
	t.Helper()
	if err := configedit.Set(home.ConfigPath(k.HomeDir), key, value); err != nil {
		t.Fatal(err)
	}
}

func TestRateLimitOverrideDeniesAndAudits(t *testing.T) {
	k := newHome(t)
	ran := rateLimitPipeline(t, k, "toolpack")
	setConfig(t, k, "guard.rate_limits.acme-pack", `{"per_minute":2,"per_hour":100,"burst":5}`)
	for i := range 2 {
		if _, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "t"}); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	res, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "t"})
	if !errors.Is(err, reason.ErrRateLimited) || !errors.Is(err, ratelimit.ErrExceeded) {
		t.Fatalf("third call: %v", err)
	}
	if !strings.Contains(err.Error(), "2 per minute for acme-pack") {
		t.Fatalf("reason %q does not name the window", err)
	}
	if *ran != 2 || res.Decision != "deny" || res.Code != "rate_limited" {
		t.Fatalf("ran %d times, result %+v", *ran, res)
	}
	rec := lastRecord(t, k)
	if rec.Event != "decision" || rec.Decision != "deny" || rec.Code != "rate_limited" || !strings.Contains(rec.Reason, "2 per minute") {
		t.Fatalf("audit record %+v", rec)
	}
}

func TestRateLimitDefaultsApplyWithoutConfig(t *testing.T) {
	for _, c := range []struct {
		pkgType string
		burst   int
	}{{"toolpack", 10}, {"agent", 20}} {
		t.Run(c.pkgType, func(t *testing.T) {
			k := newHome(t)
			ran := rateLimitPipeline(t, k, c.pkgType)
			for i := range c.burst {
				if _, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "t"}); err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
			}
			_, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "t"})
			if !errors.Is(err, ratelimit.ErrExceeded) || !strings.Contains(err.Error(), "per second for acme-pack") {
				t.Fatalf("call %d: %v", c.burst+1, err)
			}
			if *ran != c.burst {
				t.Fatalf("ran %d, want %d", *ran, c.burst)
			}
		})
	}
}

func TestRateLimitStrictCaps(t *testing.T) {
	k := newHome(t)
	rateLimitPipeline(t, k, "toolpack")
	k.Environ = []string{"AGENTNODE_GUARD_STRICT=1"}
	// An override looser than strict is capped at 30 per minute.
	setConfig(t, k, "guard.rate_limits.acme-pack", `{"per_minute":1000,"per_hour":10000,"burst":1000}`)
	for i := range 30 {
		if _, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "t"}); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	_, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "t"})
	if !errors.Is(err, ratelimit.ErrExceeded) || !strings.Contains(err.Error(), "30 per minute") {
		t.Fatalf("call 31 in strict mode: %v", err)
	}
}

func TestRateLimitDryRunConsumesNothing(t *testing.T) {
	k := newHome(t)
	ran := rateLimitPipeline(t, k, "toolpack")
	setConfig(t, k, "guard.rate_limits.acme-pack", `{"per_minute":1,"per_hour":1,"burst":1}`)
	for range 3 {
		res, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "t", DryRun: true})
		if err != nil || res.Decision != "allow" {
			t.Fatalf("dry run: %+v %v", res, err)
		}
	}
	if _, err := os.Stat(home.RateLimitPath(k.HomeDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dry run created the rate-limit state: %v", err)
	}
	if _, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "t"}); err != nil {
		t.Fatalf("the one real call after dry runs: %v", err)
	}
	// Full now: a dry run reports the refusal it would get, still
	// recording nothing.
	res, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "t", DryRun: true})
	if !errors.Is(err, ratelimit.ErrExceeded) || res.Code != "rate_limited" || *ran != 1 {
		t.Fatalf("dry run at the limit: %+v %v (ran %d)", res, err, *ran)
	}
}

func TestRateLimitCorruptStateDenies(t *testing.T) {
	k := newHome(t)
	ran := rateLimitPipeline(t, k, "toolpack")
	path := home.RateLimitPath(k.HomeDir)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	junk := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 4096)
	if err := os.WriteFile(path, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dry := range []bool{true, false} {
		_, err := k.Run(context.Background(), &Request{Package: "acme-pack", Tool: "t", DryRun: dry})
		if !errors.Is(err, ratelimit.ErrCorrupt) || reason.CodeOf(err) != reason.RateLimited || !strings.Contains(err.Error(), path) {
			t.Fatalf("dry=%v: %v", dry, err)
		}
	}
	if *ran != 0 {
		t.Fatal("ran with a corrupt rate-limit state")
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, junk) {
		t.Fatal("the corrupt state file was changed")
	}
	if rec := lastRecord(t, k); rec.Code != "rate_limited" || !strings.Contains(rec.Reason, "corrupt") {
		t.Fatalf("audit record %+v", rec)
	}
}
