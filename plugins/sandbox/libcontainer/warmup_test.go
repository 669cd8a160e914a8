package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestPidsCgroup(t *testing.T) {
	cases := []struct {
		listing, want string
		ok            bool
	}{
		{"12:pids:/user.slice/a\n4:memory:/x\n0::/\n", "/user.slice/a", true},
		{"4:memory:/x\n8:pids:/\n", "/", true},
		{"4:memory:/x\n0::/\n", "", false}, // no pids hierarchy
		{"8:pids:/a/../b\n", "", false},    // not clean
		{"8:pids:relative\n", "", false},   // not absolute
		{"8:pids:/a/b/\n", "", false},      // not clean
		{"8:cpu,pids:/a\n", "/a", true},    // co-mounted controllers
		{"8:pids:/a:b\n", "/a:b", true},    // a colon is part of the path
		{"", "", false},
	}
	for _, tc := range cases {
		got, err := pidsCgroup(tc.listing)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("pidsCgroup(%q) = %q, %v; want %q, ok=%v", tc.listing, got, err, tc.want, tc.ok)
		}
	}
}

// threadCgroups maps every thread of this process to its cgroup listing.
func threadCgroups(t *testing.T) map[string]string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/self/task/*")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, "cgroup"))
		if err != nil {
			continue // the thread exited meanwhile
		}
		out[filepath.Base(d)] = pidsLine(string(data))
	}
	return out
}

// pidsLine is the pids hierarchy's line of a /proc/…/cgroup text: the only
// hierarchy the warm-up writes to. The others are left out of the
// comparison because whoever supervises this test process may move it in
// them meanwhile (a job runner emptying a memory cgroup it made), which no
// warm-up can cause.
func pidsLine(cg string) string {
	for _, line := range strings.Split(cg, "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "pids") {
			return line
		}
	}
	return cg
}

// onThread runs f on a fresh thread that ends with it, as warmCgroupLock
// does, and returns how long f took.
func onThread(t testing.TB, f func() error) time.Duration {
	t.Helper()
	type result struct {
		d   time.Duration
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends here
		start := time.Now()
		err := f()
		done <- result{time.Since(start), err}
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.d
}

// probeMigration is a cgroup migration written independently of
// migrateSelfThread: the calling thread into its own pids cgroup.
func probeMigration() error {
	data, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "pids") {
			tasks := filepath.Join(warmTasksRoot(), parts[2], "tasks")
			return os.WriteFile(tasks, []byte(strconv.Itoa(unix.Gettid())), 0)
		}
	}
	return errors.New("no pids cgroup")
}

// TestWarmCgroupLock: the warm-up works on this host and moves nothing (the
// migrated thread and every other thread of this process are in the same
// cgroups afterwards). That it leaves the kernel's migration lock warm is a
// matter of time, measured by BenchmarkMigrationAfterWarmUp.
func TestWarmCgroupLock(t *testing.T) {
	b, _ := setup(t)
	root := warmTasksRoot()
	if root == "" {
		if cgroups2Unified() {
			t.Skip("cgroup v2: no thread-level warm-up")
		}
		t.Fatal("no cgroup v1 pids hierarchy found to warm with")
	}

	before := threadCgroups(t)
	onThread(t, func() error {
		was, err := os.ReadFile("/proc/thread-self/cgroup")
		if err != nil {
			return err
		}
		if err := migrateSelfThread(root); err != nil {
			return err
		}
		is, err := os.ReadFile("/proc/thread-self/cgroup")
		if err == nil && pidsLine(string(is)) != pidsLine(string(was)) {
			err = fmt.Errorf("the warm-up moved its thread from\n%s\nto\n%s", was, is)
		}
		return err
	})
	onThread(t, probeMigration) // the probe works here (the benchmark relies on it)
	var known []string
	for _, cg := range before {
		known = append(known, cg)
	}
	for tid, cg := range threadCgroups(t) {
		if old, ok := before[tid]; ok && old != cg {
			t.Errorf("thread %s moved from\n%s\nto\n%s", tid, old, cg)
		}
		if !slices.Contains(known, cg) {
			t.Errorf("thread %s is in cgroups no thread was in before:\n%s", tid, cg)
		}
	}

	// The backend's entry point: setup's Availability started one; wait
	// for it, start another and see it finish and clear its flag.
	waitWarmed := func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second) // a safety net
		for b.warming.Load() {
			if time.Now().After(deadline) {
				t.Fatal("warm-up still under way after 30s")
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitWarmed()
	b.warmCgroupLock()
	waitWarmed()
}

// BenchmarkMigrationAfterWarmUp measures a cgroup migration with the
// kernel's migration lock cold (60 ms after the last migration) and right
// after a warm-up: a cold one waits for an RCU grace period (4 to 20 ms on
// a quiet machine), a warm one should not (well under 1 ms). Reported as
// cold-ms/op and warm-ms/op (medians), with warm/cold their ratio.
func BenchmarkMigrationAfterWarmUp(b *testing.B) {
	setup(b)
	root := warmTasksRoot()
	if root == "" {
		b.Skip("no cgroup v1 pids hierarchy: no thread-level warm-up")
	}
	var cold, warm []time.Duration
	for range b.N {
		time.Sleep(60 * time.Millisecond) // let the lock go cold
		cold = append(cold, onThread(b, probeMigration))
		time.Sleep(60 * time.Millisecond)
		onThread(b, func() error { return migrateSelfThread(root) })
		warm = append(warm, onThread(b, probeMigration))
	}
	slices.Sort(cold)
	slices.Sort(warm)
	c, w := cold[len(cold)/2], warm[len(warm)/2]
	b.ReportMetric(float64(c)/1e6, "cold-ms/op")
	b.ReportMetric(float64(w)/1e6, "warm-ms/op")
	b.ReportMetric(float64(w)/float64(max(c, 1)), "warm/cold")
}
