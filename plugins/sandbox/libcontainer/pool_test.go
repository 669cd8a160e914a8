package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// warmSpec is spec with a warm pool of size for it.
func warmSpec(fx fixture, id string, size int, idle time.Duration, args ...string) sandbox.Spec {
	s := spec(fx, id, args...)
	s.Warm = sandbox.WarmPool{Size: size, Idle: idle}
	return s
}

// readyWarm waits until every container being prepared for s is ready and
// returns the ids of those the pool holds for s.
func readyWarm(b *backend, s sandbox.Spec) []string {
	key := warmKey(s)
	b.pool.mu.Lock()
	var entries []*warmEntry
	for _, e := range b.pool.entries {
		if e.key == key {
			entries = append(entries, e)
		}
	}
	b.pool.mu.Unlock()
	var ids []string
	for _, e := range entries {
		<-e.ready
		if e.box != nil {
			ids = append(ids, e.box.id)
		}
	}
	return ids
}

// warmLeftovers lists what is left on the host of any prepared container
// of b: state directories, run roots and cgroups named warmPrefix*.
func warmLeftovers(b *backend) []string {
	var left []string
	for _, pat := range []string{
		filepath.Join(b.stateRoot, warmPrefix+"*"),
		filepath.Join(b.rootsDir(), warmPrefix+"*"),
		"/sys/fs/cgroup/" + strings.TrimPrefix(b.cgroupParent, "/") + "/" + warmPrefix + "*",
		"/sys/fs/cgroup/*/" + strings.TrimPrefix(b.cgroupParent, "/") + "/" + warmPrefix + "*",
	} {
		m, _ := filepath.Glob(pat)
		left = append(left, m...)
	}
	return left
}

// closeWarm shuts the pool down at the end of a test and checks that no
// prepared container is left.
func closeWarm(t *testing.T, b *backend) {
	t.Cleanup(func() {
		b.pool.closePool(b)
		if left := warmLeftovers(b); len(left) > 0 {
			t.Errorf("prepared containers left after the pool closed: %v", left)
		}
	})
}

// A run with a warm pool leaves a container prepared for its spec; the
// next run with that spec takes it (a run of its own: its stdin, its
// exit, its cleanup proven), and the container is destroyed after that
// one run: the pool prepares a new one under another id.
func TestWarmPoolServesOnce(t *testing.T) {
	b, fx := setup(t)
	closeWarm(t, b)
	script := []string{"sh", "-c", "id -u; cat; cat /pack/hello.txt; exit 3"}
	first := newID(t, b, "warm")
	resp, out, _ := run(t, b, warmSpec(fx, first, 1, time.Minute, script...), []byte("one\n"))
	if resp.ExitCode != 3 || out != "1000\none\nfrom the pack\n" || !resp.CleanupVerified {
		t.Fatalf("cold run: %+v stdout %q", resp, out)
	}
	if b.pool.hits.Load() != 0 {
		t.Fatal("the first run was served warm: nothing was prepared yet")
	}
	s := warmSpec(fx, "", 1, time.Minute, script...)
	prepared := readyWarm(b, s)
	if len(prepared) != 1 {
		t.Fatalf("prepared for the spec: %v, want one", prepared)
	}
	second := newID(t, b, "warm")
	s.RunID = second
	s.Timeout = 30 * time.Second // the timeout is no part of the match
	resp, out, _ = run(t, b, s, []byte("two\n"))
	if resp.ExitCode != 3 || out != "1000\ntwo\nfrom the pack\n" || !resp.CleanupVerified || resp.Killed {
		t.Fatalf("warm run: %+v stdout %q", resp, out)
	}
	if got := b.pool.hits.Load(); got != 1 {
		t.Fatalf("warm hits = %d, want 1", got)
	}
	assertNoLeftovers(t, b, fx, prepared[0])
	again := readyWarm(b, s)
	if len(again) != 1 || again[0] == prepared[0] {
		t.Fatalf("prepared after the warm run: %v (the used one was %s)", again, prepared[0])
	}
}

// A tool that leaves a file in /tmp and processes behind: the next call,
// served by a warm container (prepared right after the earlier call, in
// the same plugin), sees neither. Each call first reports what it sees, then plants both.
func TestWarmPoolNothingCarriesOver(t *testing.T) {
	b, fx := setup(t)
	closeWarm(t, b)
	attack := []string{"sh", "-c", `ls -A /tmp; echo ---; for p in /proc/[0-9]*; do cat $p/comm; done; ` +
		`echo secret > /tmp/left-behind; (sleep 1000 >/dev/null 2>&1 &); sleep 1000 >/dev/null 2>&1 &`}
	for i := range 3 {
		resp, out, _ := run(t, b, warmSpec(fx, newID(t, b, "warm"), 1, time.Minute, attack...), nil)
		if got := b.pool.hits.Load(); got != int64(i) {
			t.Fatalf("call %d: %d warm hits, want %d", i, got, i)
		}
		tmp, procs, ok := strings.Cut(out, "---\n")
		if !ok || resp.ExitCode != 0 {
			t.Fatalf("call %d: %+v stdout %q", i, resp, out)
		}
		if strings.TrimSpace(tmp) != "" {
			t.Errorf("call %d sees /tmp of an earlier call: %q", i, tmp)
		}
		if strings.Contains(procs, "sleep") {
			t.Errorf("call %d sees an earlier call's process: %q", i, procs)
		}
		readyWarm(b, warmSpec(fx, "", 1, time.Minute, attack...))
	}
}

// A run whose spec differs in anything but RunID and Timeout never gets a
// container prepared for another: here only its environment differs. With
// a pool of one, the other spec's container is destroyed to make room.
func TestWarmPoolOtherSpecNeverMatches(t *testing.T) {
	b, fx := setup(t)
	closeWarm(t, b)
	a := warmSpec(fx, newID(t, b, "warm"), 1, time.Minute, "sh", "-c", "echo $AGENTNODE_TEST")
	run(t, b, a, nil)
	preparedA := readyWarm(b, a)
	if len(preparedA) != 1 {
		t.Fatalf("prepared for a: %v", preparedA)
	}
	other := a
	other.RunID = newID(t, b, "warm")
	other.Env = []string{"AGENTNODE_TEST=2"}
	_, out, _ := run(t, b, other, nil)
	if out != "2\n" || b.pool.hits.Load() != 0 {
		t.Fatalf("a run with another environment: stdout %q, warm hits %d", out, b.pool.hits.Load())
	}
	other.Limits.Pids = 77
	other.RunID = newID(t, b, "warm")
	readyWarm(b, other)
	run(t, b, other, nil)
	if b.pool.hits.Load() != 0 {
		t.Fatal("a run with other limits took a prepared container")
	}
	// a's container made room for the others' and is gone.
	b.pool.bg.Wait()
	assertNoLeftovers(t, b, fx, preparedA[0])
}

// `agentnode install` replaces a package by renaming a new directory into
// its place: a container prepared with the old one mounted is not used
// (the run is cold and sees the new package), and it is destroyed.
func TestWarmPoolPackageReplaced(t *testing.T) {
	b, fx := setup(t)
	closeWarm(t, b)
	dir, err := os.MkdirTemp("", "agentnode-warm-pack-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pack := filepath.Join(dir, "pack")
	write := func(content string) {
		t.Helper()
		if err := os.MkdirAll(pack, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pack, "hello.txt"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write("old\n")
	s := warmSpec(fx, newID(t, b, "warm"), 1, time.Minute, "cat", "/pack/hello.txt")
	s.PackageDir = pack
	if _, out, _ := run(t, b, s, nil); out != "old\n" {
		t.Fatalf("stdout %q", out)
	}
	prepared := readyWarm(b, s)
	if len(prepared) != 1 {
		t.Fatalf("prepared: %v", prepared)
	}
	if err := os.Rename(pack, pack+".old"); err != nil {
		t.Fatal(err)
	}
	write("new\n")
	s.RunID = newID(t, b, "warm")
	if _, out, _ := run(t, b, s, nil); out != "new\n" {
		t.Fatalf("after the package was replaced: stdout %q, want the new package's", out)
	}
	if b.pool.hits.Load() != 0 {
		t.Fatal("a container with the replaced package mounted was used")
	}
	b.pool.bg.Wait()
	assertNoLeftovers(t, b, fx, prepared[0])
	// Unchanged since: the next run is warm again.
	readyWarm(b, s)
	s.RunID = newID(t, b, "warm")
	if _, out, _ := run(t, b, s, nil); out != "new\n" || b.pool.hits.Load() != 1 {
		t.Fatalf("stdout %q, warm hits %d", out, b.pool.hits.Load())
	}
}

// A prepared container nobody takes is destroyed after the idle time.
func TestWarmPoolIdle(t *testing.T) {
	b, fx := setup(t)
	closeWarm(t, b)
	s := warmSpec(fx, newID(t, b, "warm"), 1, 50*time.Millisecond, "true")
	b.pool.fill(b, s)
	// The entry, taken while it is still prepared: the idle time starts
	// once it is ready.
	b.pool.mu.Lock()
	entries := slices.Clone(b.pool.entries)
	b.pool.mu.Unlock()
	if len(entries) != 1 {
		t.Fatalf("pool entries: %d, want 1", len(entries))
	}
	<-entries[0].ready
	if entries[0].box == nil {
		t.Fatal("preparing failed")
	}
	for len(readyWarm(b, s)) > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	b.pool.bg.Wait()
	assertNoLeftovers(t, b, fx, entries[0].box.id)
	if left := warmLeftovers(b); len(left) > 0 {
		t.Fatalf("left after the idle time: %v", left)
	}
}

// A cancelled run that waited for a container being prepared gets none,
// and that container is destroyed.
func TestWarmPoolTakeCancelled(t *testing.T) {
	b, fx := setup(t)
	closeWarm(t, b)
	s := warmSpec(fx, newID(t, b, "warm"), 1, time.Minute, "true")
	b.pool.fill(b, s)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if x := b.pool.take(ctx, b, s); x != nil {
		b.discard(x)
		t.Fatal("a cancelled take got a container")
	}
	b.pool.bg.Wait()
	if left := warmLeftovers(b); len(left) > 0 {
		t.Fatalf("left after a cancelled take: %v", left)
	}
}

// A prepared container whose plugin process died is an orphan like any
// run's: the next plugin's sweep destroys it and its root.
func TestWarmPoolOrphanReaped(t *testing.T) {
	b, fx := setup(t)
	dead := newBackend(b.log)
	dead.stateRoot, dead.cgroupParent = b.stateRoot, b.cgroupParent
	dead.subuidFile, dead.subgidFile = b.subuidFile, b.subgidFile
	dead.owner = "2147483647:1" // no such process
	x, err := dead.prepare(spec(fx, "", "sleep", "1000"))
	if err != nil {
		t.Fatal(err)
	}
	// Its plugin is "dead": nothing of it acts any more.
	x.armed.Disarm()
	x.pipes.Abort()
	t.Cleanup(func() { forceCleanup(b, x.id); x.slot.release() })
	if left := warmLeftovers(b); !slices.Contains(left, filepath.Join(b.stateRoot, x.id)) {
		t.Fatalf("the prepared container is not there: %v", left)
	}
	n, err := b.reapOrphans()
	if err != nil || n < 1 {
		t.Fatalf("reapOrphans = %d, %v", n, err)
	}
	if err := b.reapOrphanRoots(); err != nil {
		t.Fatal(err)
	}
	_, _ = x.proc.Wait()
	assertNoLeftovers(t, b, fx, x.id)
	if left := warmLeftovers(b); len(left) > 0 {
		t.Fatalf("left of the orphaned prepared container: %v", left)
	}
}

// warmBackend runs every run in a container prepared for it: what a warm
// pool hands a run, checked by the conformance and escape suite.
type warmBackend struct{ b *backend }

func (w warmBackend) Availability(ctx context.Context, req *sandbox.AvailabilityRequest) (*sandbox.AvailabilityResponse, error) {
	return w.b.Availability(ctx, req)
}

func (w warmBackend) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.RunResponse, error) {
	if err := validateRunID(req.RunID); err != nil {
		return nil, err
	}
	x, err := w.b.prepare(req.Spec)
	if err != nil {
		return nil, err
	}
	return w.b.runBox(ctx, x, req)
}

// TestConformanceWarm runs the whole suite with every run in a prepared
// container: a warm container is as hardened as a cold one.
func TestConformanceWarm(t *testing.T) {
	b, fx := setup(t)
	c := sandboxtest.Connect(t, info(), warmBackend{b})
	sandboxtest.Run(t, c, suiteConfig(fx))
	if left := warmLeftovers(b); len(left) > 0 {
		t.Errorf("prepared containers left: %v", left)
	}
}

// BenchmarkWarmPool interleaves, in-process, a run of busybox true taking
// a prepared container ("warm", the pool given time to prepare it between
// runs, as between the calls of a client), the same run made cold
// ("cold"), and an os/exec of the same binary ("os-exec"). Reported: the
// median of each ("<name>-ms") and warm/cold.
func BenchmarkWarmPool(b *testing.B) {
	be, fx := setup(b)
	b.Cleanup(func() { be.pool.closePool(be) })
	prefix := fmt.Sprintf("bench-warm-%d", os.Getpid())
	b.Cleanup(func() { sweep(be, prefix) })
	runOne := func(s sandbox.Spec) time.Duration {
		s.RunID = fmt.Sprintf("%s-%d", prefix, benchSeq.Add(1))
		start := time.Now()
		resp, err := be.Run(b.Context(), &sandbox.RunRequest{Spec: s})
		d := time.Since(start)
		if err != nil || resp.ExitCode != 0 || !resp.CleanupVerified {
			b.Fatalf("resp %+v, %v", resp, err)
		}
		return d
	}
	warm := warmSpec(fx, "", 1, time.Minute, "true")
	cold := spec(fx, "", "true")
	exe := benchExec(b)
	runOne(warm)
	var samples [3][]time.Duration
	hits := be.pool.hits.Load()
	for b.Loop() {
		readyWarm(be, warm) // between calls: not timed
		samples[0] = append(samples[0], runOne(warm))
		readyWarm(be, warm) // the next one, prepared before the cold run
		samples[1] = append(samples[1], runOne(cold))
		start := time.Now()
		exe()
		samples[2] = append(samples[2], time.Since(start))
	}
	b.StopTimer()
	if got := be.pool.hits.Load() - hits; got != int64(len(samples[0])) {
		b.Fatalf("%d of %d warm runs took a prepared container", got, len(samples[0]))
	}
	med := func(s []time.Duration) float64 {
		slices.Sort(s)
		return float64(s[len(s)/2].Microseconds()) / 1000
	}
	w, c, e := med(samples[0]), med(samples[1]), med(samples[2])
	b.ReportMetric(w, "warm-ms")
	b.ReportMetric(c, "cold-ms")
	b.ReportMetric(e, "os-exec-ms")
	b.ReportMetric(w/c, "warm/cold")
}
