package ratelimit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain lets the test binary act as a helper process: with
// RATELIMIT_HELPER set it admits calls against a state file and exits.
func TestMain(m *testing.M) {
	if os.Getenv("RATELIMIT_HELPER") == "1" {
		os.Exit(helper())
	}
	os.Exit(m.Run())
}

// helper tries RATELIMIT_TRIES admits of RATELIMIT_PKG against
// RATELIMIT_PATH with the limit RATELIMIT_MAX on every window and the clock
// fixed at RATELIMIT_NOW, and prints how many were admitted. Any error other
// than "exceeded" exits 1.
func helper() int {
	tries, _ := strconv.Atoi(os.Getenv("RATELIMIT_TRIES"))
	limit, _ := strconv.ParseInt(os.Getenv("RATELIMIT_MAX"), 10, 64)
	now, _ := strconv.ParseInt(os.Getenv("RATELIMIT_NOW"), 10, 64)
	s := New(os.Getenv("RATELIMIT_PATH"), Options{
		Now:         func() time.Time { return time.Unix(0, now) },
		LockTimeout: time.Minute,
	})
	lim := Limit{Burst: limit, PerMinute: limit, PerHour: limit}
	admitted := 0
	for range tries {
		err := s.Admit(context.Background(), os.Getenv("RATELIMIT_PKG"), lim)
		switch {
		case err == nil:
			admitted++
		case errors.Is(err, ErrExceeded):
		default:
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Println(admitted)
	return 0
}

// TestConcurrentProcessesNeverOverAdmit starts real OS processes that race
// for one limit in one fresh state file (so they also race to create it):
// exactly the limit is admitted in total.
func TestConcurrentProcessesNeverOverAdmit(t *testing.T) {
	const (
		procs = 8
		tries = 15
		limit = 37
	)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "state", "ratelimit.db")
	now := time.Now().UnixNano()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
		fails []string
	)
	start := make(chan struct{})
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), "RATELIMIT_HELPER=1", "RATELIMIT_PATH="+path,
				"RATELIMIT_PKG=acme-pack", fmt.Sprintf("RATELIMIT_TRIES=%d", tries),
				fmt.Sprintf("RATELIMIT_MAX=%d", limit), fmt.Sprintf("RATELIMIT_NOW=%d", now))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			<-start
			err := cmd.Run()
			mu.Lock()
			defer mu.Unlock()
			n, perr := strconv.Atoi(strings.TrimSpace(stdout.String()))
			if err != nil || perr != nil {
				fails = append(fails, fmt.Sprintf("helper %d: %v %v: %s", i, err, perr, stderr.String()))
				return
			}
			total += n
		}()
	}
	close(start)
	wg.Wait()
	if len(fails) > 0 {
		t.Fatal(strings.Join(fails, "\n"))
	}
	if total != limit {
		t.Fatalf("%d processes × %d tries admitted %d calls in total, want exactly the limit %d", procs, tries, total, limit)
	}
	s := New(path, Options{Now: func() time.Time { return time.Unix(0, now) }})
	if n := len(stored(t, s, "acme-pack")); n != limit {
		t.Fatalf("%d calls recorded, want %d", n, limit)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("state dir holds %d entries after the race, want 1 (no temp files left)", len(entries))
	}
}
