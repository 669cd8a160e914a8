package ratelimit

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agentnode/agentnode/kernel/reason"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newStore(t testing.TB) (*Store, *clock) {
	t.Helper()
	c := newClock()
	return New(filepath.Join(t.TempDir(), "state", "ratelimit.db"), Options{Now: c.Now, LockTimeout: time.Second}), c
}

// admitN admits n calls and fails the test unless all are admitted.
func admitN(t *testing.T, s *Store, pkg string, lim Limit, n int) {
	t.Helper()
	for i := range n {
		if err := s.Admit(context.Background(), pkg, lim); err != nil {
			t.Fatalf("call %d of %d: %v", i+1, n, err)
		}
	}
}

// wantExceeded fails unless err is a rate_limited ErrExceeded naming want.
func wantExceeded(t *testing.T, err error, want string) {
	t.Helper()
	if !errors.Is(err, ErrExceeded) || !errors.Is(err, reason.ErrRateLimited) {
		t.Fatalf("err = %v, want %s exceeded", err, want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("err %q does not name %q", err, want)
	}
}

// stored returns pkg's recorded timestamps, read from the file directly.
func stored(t *testing.T, s *Store, pkg string) []int64 {
	t.Helper()
	db, err := bolt.Open(s.path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ts []int64
	err = db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(windowsBucket).Get([]byte(pkg))
		if v == nil {
			return nil
		}
		var err error
		ts, err = decodeWindow(pkg, v)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestBurstWindow(t *testing.T) {
	s, c := newStore(t)
	lim := Limit{Burst: 3, PerMinute: 100, PerHour: 1000}
	admitN(t, s, "acme-pack", lim, 3)
	wantExceeded(t, s.Admit(context.Background(), "acme-pack", lim), "3 per second for acme-pack")
	c.Add(999 * time.Millisecond)
	wantExceeded(t, s.Admit(context.Background(), "acme-pack", lim), "3 per second")
	c.Add(time.Millisecond) // the first three are exactly 1s old: out of the window
	admitN(t, s, "acme-pack", lim, 3)
	if n := len(stored(t, s, "acme-pack")); n != 6 {
		t.Fatalf("%d timestamps stored, want 6 (denied calls must not count)", n)
	}
}

func TestMinuteWindowSlides(t *testing.T) {
	s, c := newStore(t)
	lim := Limit{Burst: 100, PerMinute: 2, PerHour: 1000}
	admitN(t, s, "acme-pack", lim, 1) // t=0
	c.Add(30 * time.Second)
	admitN(t, s, "acme-pack", lim, 1) // t=30s
	c.Add(29*time.Second + 999*time.Millisecond)
	err := s.Admit(context.Background(), "acme-pack", lim)
	wantExceeded(t, err, "2 per minute for acme-pack")
	if !strings.Contains(err.Error(), "retry in 1s") {
		t.Fatalf("retry hint: %v", err)
	}
	c.Add(time.Millisecond) // t=60s: the call at t=0 has left the window
	admitN(t, s, "acme-pack", lim, 1)
	wantExceeded(t, s.Admit(context.Background(), "acme-pack", lim), "retry in 30s")
}

func TestHourWindowAndCap(t *testing.T) {
	s, c := newStore(t)
	lim := Limit{Burst: 100, PerMinute: 100, PerHour: 3}
	for range 3 {
		admitN(t, s, "acme-pack", lim, 1)
		c.Add(10 * time.Minute)
	}
	// t=30min: three calls in the hour.
	err := s.Admit(context.Background(), "acme-pack", lim)
	wantExceeded(t, err, "3 per hour for acme-pack")
	if !strings.Contains(err.Error(), "retry in 30m0s") {
		t.Fatalf("retry hint: %v", err)
	}
	c.Add(30*time.Minute + time.Nanosecond) // the first call is now older than an hour
	admitN(t, s, "acme-pack", lim, 1)
	if n := len(stored(t, s, "acme-pack")); n != 3 {
		t.Fatalf("%d timestamps kept, want at most per_hour = 3", n)
	}
	// Lowering the limit in the config takes effect at once, and an
	// admitted call never keeps more than the new per_hour timestamps.
	c.Add(2 * time.Hour)
	admitN(t, s, "acme-pack", Limit{Burst: 100, PerMinute: 100, PerHour: 10}, 10)
	c.Add(time.Second)
	wantExceeded(t, s.Admit(context.Background(), "acme-pack", Limit{Burst: 100, PerMinute: 100, PerHour: 2}), "2 per hour")
	c.Add(time.Hour)
	admitN(t, s, "acme-pack", Limit{Burst: 100, PerMinute: 100, PerHour: 2}, 2)
	if n := len(stored(t, s, "acme-pack")); n != 2 {
		t.Fatalf("%d timestamps kept, want 2", n)
	}
}

func TestDefaultsAreEnforced(t *testing.T) {
	for _, c := range []struct {
		pkgType string
		strict  bool
		burst   int
		perMin  int
		perMsg  string
	}{
		{"toolpack", false, 10, 60, "60 per minute"},
		{"mcp_server", false, 10, 60, "60 per minute"},
		{"agent", false, 20, 120, "120 per minute"},
		{"toolpack", true, 10, 30, "30 per minute"},
		{"agent", true, 20, 30, "30 per minute"},
	} {
		t.Run(c.pkgType+map[bool]string{true: "-strict"}[c.strict], func(t *testing.T) {
			s, clk := newStore(t)
			lim := Resolve(c.pkgType, nil, c.strict)
			admitN(t, s, "pkg", lim, c.burst)
			wantExceeded(t, s.Admit(context.Background(), "pkg", lim), "per second")
			admitted := c.burst
			for admitted < c.perMin {
				clk.Add(time.Second)
				admitN(t, s, "pkg", lim, min(c.burst, c.perMin-admitted))
				admitted += min(c.burst, c.perMin-admitted)
			}
			clk.Add(time.Second)
			wantExceeded(t, s.Admit(context.Background(), "pkg", lim), c.perMsg)
		})
	}
}

func TestResolve(t *testing.T) {
	over := &Limit{Burst: 2, PerMinute: 100, PerHour: 5000}
	for _, c := range []struct {
		name     string
		pkgType  string
		override *Limit
		strict   bool
		want     Limit
	}{
		{"toolpack", "toolpack", nil, false, Limit{10, 60, 1000}},
		{"agent", "agent", nil, false, Limit{20, 120, 2000}},
		{"mcp server", "mcp_server", nil, false, Limit{10, 60, 1000}},
		{"strict toolpack", "toolpack", nil, true, Limit{10, 30, 500}},
		{"strict agent", "agent", nil, true, Limit{20, 30, 500}},
		{"override", "toolpack", over, false, Limit{2, 100, 5000}},
		{"override replaces the agent default", "agent", over, false, Limit{2, 100, 5000}},
		{"strict caps an override", "toolpack", over, true, Limit{2, 30, 500}},
		{"strict keeps a tighter override", "toolpack", &Limit{1, 5, 50}, true, Limit{1, 5, 50}},
		{"a partial override keeps the type's other values", "agent", &Limit{PerHour: 7}, false, Limit{20, 120, 7}},
		{"a partial override of a toolpack", "toolpack", &Limit{Burst: 2}, false, Limit{2, 60, 1000}},
		{"strict caps a partial override's defaults", "agent", &Limit{Burst: 3}, true, Limit{3, 30, 500}},
	} {
		if got := Resolve(c.pkgType, c.override, c.strict); got != c.want {
			t.Errorf("%s: Resolve = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestBadLimitIsConfigInvalid(t *testing.T) {
	s, _ := newStore(t)
	err := s.Admit(context.Background(), "acme-pack", Limit{Burst: 1, PerMinute: 0, PerHour: 1})
	if !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), "per_minute") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(s.path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a refused call created the state file")
	}
}

func TestPackagesAreIndependent(t *testing.T) {
	s, c := newStore(t)
	lim := Limit{Burst: 1, PerMinute: 1, PerHour: 1}
	admitN(t, s, "pkg-a", lim, 1)
	admitN(t, s, "pkg-b", lim, 1)
	wantExceeded(t, s.Admit(context.Background(), "pkg-a", lim), "pkg-a")
	// An idle package's window is dropped after an hour.
	c.Add(time.Hour + time.Second)
	admitN(t, s, "pkg-a", lim, 1)
	if ts := stored(t, s, "pkg-b"); ts != nil {
		t.Fatalf("idle window of pkg-b kept: %v", ts)
	}
}

func TestCheckRecordsNothing(t *testing.T) {
	s, _ := newStore(t)
	lim := Limit{Burst: 2, PerMinute: 10, PerHour: 10}
	if err := s.Check(context.Background(), "acme-pack", lim); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(s.path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("Check created the state directory")
	}
	admitN(t, s, "acme-pack", lim, 1)
	before, _ := os.ReadFile(s.path)
	for range 5 {
		if err := s.Check(context.Background(), "acme-pack", lim); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := os.ReadFile(s.path)
	if !bytes.Equal(before, after) {
		t.Fatal("Check changed the state file")
	}
	admitN(t, s, "acme-pack", lim, 1)
	wantExceeded(t, s.Check(context.Background(), "acme-pack", lim), "2 per second")
}

func TestClockSteppedBack(t *testing.T) {
	s, c := newStore(t)
	lim := Limit{Burst: 2, PerMinute: 100, PerHour: 100}
	admitN(t, s, "acme-pack", lim, 1)
	c.Add(-10 * time.Minute)
	admitN(t, s, "acme-pack", lim, 1)
	// A call recorded "in the future" still counts: stepping the clock back
	// never frees room.
	wantExceeded(t, s.Admit(context.Background(), "acme-pack", lim), "2 per second")
	ts := stored(t, s, "acme-pack")
	if len(ts) != 2 || ts[0] > ts[1] {
		t.Fatalf("timestamps %v not kept in order", ts)
	}
}

func TestCreatesPrivateFileAtomically(t *testing.T) {
	s, _ := newStore(t)
	admitN(t, s, "acme-pack", Toolpack, 1)
	fi, err := os.Stat(s.path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode %v, want 0600", fi.Mode().Perm())
	}
	di, _ := os.Stat(filepath.Dir(s.path))
	if di.Mode().Perm() != 0o700 {
		t.Fatalf("state dir mode %v, want 0700", di.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(s.path))
	if len(entries) != 1 {
		t.Fatalf("state dir holds %d entries, want only the state file", len(entries))
	}
}

func TestLockedFileDeniesAfterTimeout(t *testing.T) {
	s, _ := newStore(t)
	admitN(t, s, "acme-pack", Toolpack, 1)
	held, err := bolt.Open(s.path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	// The lock is held for good: Admit returning at all is the proof that
	// the lock timeout ended the wait.
	s.lockTimeout = 300 * time.Millisecond
	err = s.Admit(context.Background(), "acme-pack", Toolpack)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, reason.ErrRateLimited) || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("err = %v", err)
	}
	// The caller's deadline bounds the wait too: it returns before the
	// minute-long lock timeout could have ended it.
	s.lockTimeout = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := s.Admit(ctx, "acme-pack", Toolpack); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d >= s.lockTimeout {
		t.Fatalf("waited %s: the lock timeout, not the 500ms deadline, ended the wait", d)
	}
}
