package sandboxtest

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestDecideCPU covers every combination of what the cpu-limit check can
// see: the spinners within the limit or over it; the probe's cgroup
// unreadable, or readable with no quota, a wrong quota, the right quota;
// throttled or not; the host control fast or slow (or absent).
func TestDecideCPU(t *testing.T) {
	const limit = 0.1
	type cg int
	const (
		unreadable cg = iota
		noQuota
		wrongQuota
		rightQuota
	)
	cgName := [...]string{"cgroup unreadable", "no quota", "wrong quota", "right quota"}
	// want[within][cgroup][throttled][control fast]
	want := map[bool]map[cg][2][2]cpuVerdict{
		true: {
			unreadable: {{cpuInconclusive, cpuPass}, {cpuInconclusive, cpuPass}}, // throttling unknown without a cgroup
			noQuota:    {{cpuFail, cpuFail}, {cpuFail, cpuFail}},
			wrongQuota: {{cpuFail, cpuFail}, {cpuFail, cpuFail}},
			rightQuota: {{cpuInconclusive, cpuPass}, {cpuPass, cpuPass}},
		},
		false: {
			unreadable: {{cpuFail, cpuFail}, {cpuFail, cpuFail}},
			noQuota:    {{cpuFail, cpuFail}, {cpuFail, cpuFail}},
			wrongQuota: {{cpuFail, cpuFail}, {cpuFail, cpuFail}},
			rightQuota: {{cpuFail, cpuFail}, {cpuFail, cpuFail}},
		},
	}
	for _, within := range []bool{true, false} {
		for c := unreadable; c <= rightQuota; c++ {
			for throttled := range 2 {
				for fast := range 2 {
					e := cpuEvidence{limit: limit, spinners: 2, wall: 2, used: 0.18, controlWall: 2, controlUsed: 0.3}
					if !within {
						e.used = 0.4 // 0.2 CPUs, over 0.13
					}
					if fast == 1 {
						e.controlUsed = 0.5 // 0.25 CPUs, over 2×0.1
					}
					switch c {
					case unreadable:
						e.cgErr = "not visible"
					case noQuota:
						e.cg = &cpuCgroup{dir: "/sys/fs/cgroup/cpu/x"}
					case wrongQuota:
						e.cg = &cpuCgroup{dir: "/sys/fs/cgroup/cpu/x", quota: 0.5, quotaDir: "/sys/fs/cgroup/cpu/x"}
					case rightQuota:
						e.cg = &cpuCgroup{dir: "/sys/fs/cgroup/cpu/x", quota: 0.1, quotaDir: "/sys/fs/cgroup/cpu"}
					}
					if throttled == 1 {
						e.throttled, e.throttledFor = 20, time.Second
					}
					got, detail := decideCPU(e)
					if w := want[within][c][throttled][fast]; got != w {
						t.Errorf("within %v, %s, throttled %v, control fast %v: %v, want %v (%s)",
							within, cgName[c], throttled == 1, fast == 1, got, w, detail)
					}
				}
			}
		}
	}

	base := cpuEvidence{limit: limit, spinners: 2, wall: 2, used: 0.18,
		cg: &cpuCgroup{dir: "/x", quota: 0.1, quotaDir: "/x"}, throttled: 20}
	if v, _ := decideCPU(base); v != cpuPass {
		t.Fatalf("the base case does not pass: %v", v)
	}
	for name, tc := range map[string]struct {
		mod  func(*cpuEvidence)
		want cpuVerdict
	}{
		"threads outside the cgroup":         {func(e *cpuEvidence) { e.stray = 1 }, cpuFail},
		"no measurement":                     {func(e *cpuEvidence) { e.used, e.wall = 0, 0 }, cpuFail},
		"quota a rounding off":               {func(e *cpuEvidence) { e.cg.quota = 0.10001 }, cpuPass},
		"quota tighter than asked":           {func(e *cpuEvidence) { e.cg.quota = 0.05 }, cpuFail},
		"no control, not throttled":          {func(e *cpuEvidence) { e.throttled, e.controlErr = 0, "did not start" }, cpuInconclusive},
		"control exactly at the bar":         {func(e *cpuEvidence) { e.throttled, e.controlUsed, e.controlWall = 0, 0.4, 2 }, cpuPass},
		"control just under the bar":         {func(e *cpuEvidence) { e.throttled, e.controlUsed, e.controlWall = 0, 0.39, 2 }, cpuInconclusive},
		"spinners exactly at the allowance":  {func(e *cpuEvidence) { e.used = 0.26 }, cpuPass},
		"spinners just over the allowance":   {func(e *cpuEvidence) { e.used = 0.261 }, cpuFail},
		"unreadable cgroup, no control info": {func(e *cpuEvidence) { e.cg, e.cgErr, e.throttled = nil, "gone", 0 }, cpuInconclusive},
	} {
		e := base
		cgCopy := *base.cg
		e.cg = &cgCopy
		tc.mod(&e)
		if got, detail := decideCPU(e); got != tc.want {
			t.Errorf("%s: %v, want %v (%s)", name, got, tc.want, detail)
		}
	}
}

// TestHostCPUCgroup reads the CFS state of real processes: this one, and a
// probe spinning in a cgroup the test makes with a quota of 0.01 CPUs
// (which two spinners exceed on any host, however loaded), whose throttling
// the reader must see.
func TestHostCPUCgroup(t *testing.T) {
	own, err := hostCPUCgroup(os.Getpid())
	if err != nil {
		t.Fatalf("this process's cpu cgroup: %v", err)
	}
	t.Logf("this process: %+v", *own)
	if testing.Short() {
		t.Skip("builds the probe")
	}
	if os.Geteuid() != 0 {
		t.Skip("making a cgroup needs root")
	}
	dir := filepath.Join(own.dir, "sandboxtest-cpu-"+randomHex(6))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a cgroup here: %v", err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	quotaFile, quota := "cpu.cfs_quota_us", "1000"
	if own.v2 {
		quotaFile, quota = "cpu.max", "1000 100000"
		if _, err := os.Stat(filepath.Join(dir, quotaFile)); err != nil {
			t.Skipf("the cpu controller is not enabled below %s: %v", own.dir, err)
		}
	} else if err := os.WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), []byte("100000"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, quotaFile), []byte(quota), 0o644); err != nil {
		t.Fatal(err)
	}

	probe := filepath.Join(t.TempDir(), "probe")
	if err := buildProbe(context.Background(), probe); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(probe, "cpu-limit", "0.01", "2", "sandboxtest-cpu-reader-test")
	out := newLineWatch(cpuReady)
	cmd.Stdout, cmd.Stderr = out, os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	<-out.seen
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	cg, err := hostCPUCgroup(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if cg.dir != dir || cg.quotaDir != dir || !quotaMatches(cg.quota, 0.01) {
		t.Fatalf("the probe's cgroup: %+v, want dir and quota dir %s, quota 0.01", *cg, dir)
	}
	before, _, err := cg.throttling()
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(in, "go\n")
	// Event wait: until the counter moves (the test's deadline is the bound).
	var after uint64
	for after <= before {
		time.Sleep(50 * time.Millisecond)
		if after, _, err = cg.throttling(); err != nil {
			t.Fatal(err)
		}
	}
	if n := cg.strayTasks(cmd.Process.Pid); n != 0 {
		t.Errorf("%d threads of the probe outside its cgroup", n)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	pr, ok := parseResult(out.bytes(), "cpu-limit")
	if !ok || pr.Values["wall_seconds"] <= 0 {
		t.Fatalf("no measurement: %s", out.bytes())
	}
	t.Logf("throttled %d times; probe: %s", after-before, pr.Detail)
}
