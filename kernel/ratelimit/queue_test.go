package ratelimit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentnode/agentnode/kernel/reason"
)

// Concurrent calls of one process take turns at the state file in the
// process's queue: while one holds the turn, another waits there (not at
// bbolt's file lock) and gives up with ErrUnavailable when its wait ends.
func TestAdmitWaitsForTheProcessTurn(t *testing.T) {
	s, _ := newStore(t)
	lim := Limit{Burst: 10, PerMinute: 10, PerHour: 10}
	admitN(t, s, "acme-pack", lim, 1) // the file exists
	release, err := s.queue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	short := New(s.path, Options{LockTimeout: 50 * time.Millisecond})
	err = short.Admit(context.Background(), "acme-pack", lim)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, reason.ErrRateLimited) || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("Admit while this process's turn is taken: %v, want rate_limited ErrUnavailable (busy)", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Admit(ctx, "acme-pack", lim); err == nil {
		t.Fatal("Admit with a cancelled context was admitted")
	}
	release()
	admitN(t, s, "acme-pack", lim, 1)
	if got := len(stored(t, s, "acme-pack")); got != 2 {
		t.Fatalf("%d calls recorded, want 2 (the refused ones recorded nothing)", got)
	}
}

// Many concurrent Admits of one process: each is decided on the state the
// one before it left, so exactly the burst is admitted and recorded.
func TestConcurrentAdmitsInOneProcess(t *testing.T) {
	s, _ := newStore(t)
	lim := Limit{Burst: 25, PerMinute: 1000, PerHour: 1000}
	var admitted, exceeded atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				err := s.Admit(context.Background(), "acme-pack", lim)
				switch {
				case err == nil:
					admitted.Add(1)
				case errors.Is(err, ErrExceeded):
					exceeded.Add(1)
				default:
					t.Errorf("Admit: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 25 || exceeded.Load() != 15 {
		t.Fatalf("admitted %d, refused %d of 40; want 25 and 15", admitted.Load(), exceeded.Load())
	}
	if got := len(stored(t, s, "acme-pack")); got != 25 {
		t.Fatalf("%d calls recorded, want 25", got)
	}
}
