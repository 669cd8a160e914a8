package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fscommon"

	"github.com/agentnode/agentnode/sdk/sandbox"
)

// The cpu-limit check. The CPU time a spinner gets says nothing on its own:
// on a loaded machine an unconfined spinner also gets less than the limit.
// So the suite decides from the kernel's CFS bandwidth accounting of the
// cgroup the probe runs in, read on the host while the probe spins, and
// from a control spinner it runs unconfined on the host at the same time
// (decideCPU).

// cpuLimit is the limit the CPU spinners run under: small enough that the
// spinners exceed it even on a heavily loaded host, so that the quota bites
// (measured on a 2-core host at load 9-15: under a quota of 0.5 CPUs two
// spinners got 0.34 CPUs and were never throttled; under 0.1 they were
// throttled in every period).
const cpuLimit = 0.1

const (
	// cpuSlack: the spinners may use up to the limit times this per second
	// of wall time (one CFS period's quota more, the probe's own start).
	cpuSlack = 1.3
	// cpuControlFactor: the host control must get at least the limit times
	// this for the spinners' low use to show the limit rather than the load.
	cpuControlFactor = 2
	// cpuSpinMin is how long the spinners spin at least; while the quota is
	// right but has not bitten yet, the suite lets them spin on, watching
	// the throttling counter, up to cpuSpinMax. Both are measurement
	// windows, not bounds on the machine's speed.
	cpuSpinMin = 2 * time.Second
	cpuSpinMax = 10 * time.Second
	cpuPoll    = 200 * time.Millisecond
	// cpuReady is the line the probe prints when it waits for "go" (probe
	// checkCPULimit).
	cpuReady = "cpu-limit-ready\n"
)

// cpuCgroup is where a host process's CPU time is accounted: its cgroup in
// the hierarchy of the cpu controller (cgroup v1) or the unified one (v2),
// with the tightest CFS quota on the way up to the hierarchy's root.
type cpuCgroup struct {
	v2       bool
	path     string  // as /proc/PID/cgroup names it
	dir      string  // its directory on the host
	quota    float64 // the tightest quota of the cgroup and its ancestors, in CPUs; 0: none
	quotaDir string  // the cgroup that sets it: its cpu.stat counts the throttling
}

// hostCPUCgroup finds the cpu cgroup of host process pid and the CFS quota
// it runs under.
func hostCPUCgroup(pid int) (*cpuCgroup, error) {
	paths, err := cgroups.ParseCgroupFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return nil, fmt.Errorf("reading the cgroups of pid %d: %w", pid, err)
	}
	cg := &cpuCgroup{}
	var mnt, root string
	if p, ok := paths["cpu"]; ok {
		cg.path = p
		if mnt, root, err = cgroups.FindCgroupMountpointAndRoot("", "cpu"); err != nil {
			return nil, fmt.Errorf("finding the cpu cgroup hierarchy: %w", err)
		}
	} else if p, ok := paths[""]; ok {
		cg.path, cg.v2, root = p, true, "/"
		if mnt = cgroupRoot; !cgroups.IsCgroup2UnifiedMode() {
			mnt = filepath.Join(cgroupRoot, "unified")
		}
	} else {
		return nil, fmt.Errorf("pid %d is in no cgroup of the cpu controller", pid)
	}
	rel, err := filepath.Rel(root, cg.path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("the cpu cgroup %s of pid %d is outside the hierarchy mounted at %s (root %s)", cg.path, pid, mnt, root)
	}
	cg.dir = filepath.Join(mnt, rel)
	for d := cg.dir; ; d = filepath.Dir(d) {
		q, err := cfsQuota(d, cg.v2)
		if err != nil {
			return nil, err
		}
		if q > 0 && (cg.quota == 0 || q < cg.quota) {
			cg.quota, cg.quotaDir = q, d
		}
		if len(d) <= len(mnt) {
			break
		}
	}
	return cg, nil
}

// cfsQuota reads the CFS quota of the cgroup dir, in CPUs; 0 when it sets
// none.
func cfsQuota(dir string, v2 bool) (float64, error) {
	if v2 {
		s, err := cgroups.ReadFile(dir, "cpu.max")
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil // the root, or the cpu controller not enabled here
		}
		if err != nil {
			return 0, fmt.Errorf("reading the CFS quota: %w", err)
		}
		f := strings.Fields(s)
		if len(f) != 2 {
			return 0, fmt.Errorf("malformed %s/cpu.max %q", dir, s)
		}
		if f[0] == "max" {
			return 0, nil
		}
		q, qerr := strconv.ParseInt(f[0], 10, 64)
		p, perr := strconv.ParseInt(f[1], 10, 64)
		if qerr != nil || perr != nil || q <= 0 || p <= 0 {
			return 0, fmt.Errorf("malformed %s/cpu.max %q", dir, s)
		}
		return float64(q) / float64(p), nil
	}
	q, err := fscommon.GetCgroupParamInt(dir, "cpu.cfs_quota_us")
	if err != nil {
		return 0, fmt.Errorf("reading the CFS quota: %w", err)
	}
	if q <= 0 {
		return 0, nil // -1: none
	}
	p, err := fscommon.GetCgroupParamInt(dir, "cpu.cfs_period_us")
	if err != nil || p <= 0 {
		return 0, fmt.Errorf("reading the CFS period of %s: %d, %w", dir, p, err)
	}
	return float64(q) / float64(p), nil
}

// throttling reads how often and how long the cgroup setting the quota has
// been throttled (cpu.stat).
func (c *cpuCgroup) throttling() (n uint64, t time.Duration, err error) {
	if c.quotaDir == "" {
		return 0, 0, nil
	}
	if n, err = fscommon.GetValueByKey(c.quotaDir, "cpu.stat", "nr_throttled"); err != nil {
		return 0, 0, fmt.Errorf("reading the throttling count: %w", err)
	}
	key, unit := "throttled_time", time.Nanosecond
	if c.v2 {
		key, unit = "throttled_usec", time.Microsecond
	}
	v, err := fscommon.GetValueByKey(c.quotaDir, "cpu.stat", key)
	if err != nil {
		return 0, 0, fmt.Errorf("reading the throttled time: %w", err)
	}
	return n, time.Duration(v) * unit, nil
}

// strayTasks counts the threads of pid that are not in its cpu cgroup.
func (c *cpuCgroup) strayTasks(pid int) int {
	key := "cpu"
	if c.v2 {
		key = ""
	}
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/cgroup")
	n := 0
	for _, t := range tasks {
		if p, err := cgroups.ParseCgroupFile(t); err == nil && p[key] != c.path {
			n++
		}
	}
	return n
}

// quotaMatches reports whether a quota of q CPUs is the limit asked for,
// within the rounding of a quota to whole microseconds of a period.
func quotaMatches(q, limit float64) bool {
	return q > 0 && math.Abs(q-limit) <= limit*0.01+1e-6
}

// cpuEvidence is what the suite knows after the spin.
type cpuEvidence struct {
	limit      float64 // the CPUs asked for
	spinners   int
	used, wall float64 // the probe's spinners: CPU seconds (getrusage) over wall seconds

	// controlUsed/controlWall: the unconfined host control spinning at the
	// same time; controlWall 0 when it did not run (controlErr says why).
	controlUsed, controlWall float64
	controlErr               string

	// cg is the probe's cpu cgroup, nil when it could not be read (cgErr
	// says why: a backend whose processes the host cannot see).
	cg    *cpuCgroup
	cgErr string
	// throttled and throttledFor: how much the cgroup setting the quota was
	// throttled during the spin. stray: threads of the probe outside its
	// cgroup.
	throttled    uint64
	throttledFor time.Duration
	stray        int
	// gvisorBefore: under gVisor, the gVisor sandboxes running before the
	// run (the run's is the one new one); used and wall then come from its
	// host cgroup's CPU time, not from the probe. Nil otherwise.
	gvisorBefore map[int]bool
}

func (e cpuEvidence) ratio() float64 { return e.used / e.wall }

func (e cpuEvidence) controlRatio() float64 {
	if e.controlWall <= 0 {
		return 0
	}
	return e.controlUsed / e.controlWall
}

// cpuVerdict is the outcome of decideCPU.
type cpuVerdict int

const (
	cpuPass cpuVerdict = iota
	cpuFail
	// cpuInconclusive: the configuration is right (or unknown) but neither
	// the throttling nor the control shows that the limit held.
	cpuInconclusive
)

func (v cpuVerdict) String() string {
	return [...]string{"pass", "fail", "inconclusive"}[v]
}

// decideCPU judges the cpu-limit check:
//   - the spinners using more than limit×cpuSlack fails, always;
//   - where the probe's cgroup can be read: no CFS quota on it or its
//     ancestors, a quota other than the limit, or threads outside it fail;
//     the right quota passes when it throttled the spinners;
//   - the ratio proof: spinners within the limit while the unconfined host
//     control got at least limit×cpuControlFactor pass;
//   - otherwise (the quota right but not seen to bite, or the cgroup
//     unreadable, and the host too loaded for the control to show the
//     difference) the check is inconclusive, never passed.
func decideCPU(e cpuEvidence) (cpuVerdict, string) {
	var b strings.Builder
	fmt.Fprintf(&b, "%d spinners used %.3f CPU s in %.3f s: %.2f CPUs, limit %.2f (allowed up to %.2f)",
		e.spinners, e.used, e.wall, e.ratio(), e.limit, e.limit*cpuSlack)
	if e.controlWall > 0 {
		fmt.Fprintf(&b, "; the host control got %.2f CPUs at the same time (needs %.2f to show the limit)", e.controlRatio(), e.limit*cpuControlFactor)
	} else {
		fmt.Fprintf(&b, "; no host control: %s", e.controlErr)
	}
	if e.cg != nil {
		fmt.Fprintf(&b, "; cgroup %s: ", e.cg.dir)
		if e.cg.quota > 0 {
			fmt.Fprintf(&b, "CFS quota %.3f CPUs (set at %s), throttled %d times for %v during the spin", e.cg.quota, e.cg.quotaDir, e.throttled, e.throttledFor)
		} else {
			b.WriteString("no CFS quota on it or its ancestors")
		}
	} else {
		fmt.Fprintf(&b, "; the probe's cgroup is not readable on the host: %s", e.cgErr)
	}
	detail := b.String()
	controlShows := e.controlRatio() >= e.limit*cpuControlFactor
	switch {
	case e.wall <= 0:
		return cpuFail, "the probe reported no measurement: " + detail
	case e.ratio() > e.limit*cpuSlack:
		return cpuFail, "the spinners used more than the limit: " + detail
	case e.cg != nil && e.cg.quota == 0:
		return cpuFail, "the probe runs under no CFS quota: " + detail
	case e.cg != nil && !quotaMatches(e.cg.quota, e.limit):
		return cpuFail, fmt.Sprintf("the probe's CFS quota is %.3f CPUs, not the %.3f asked for: %s", e.cg.quota, e.limit, detail)
	case e.cg != nil && e.stray > 0:
		return cpuFail, fmt.Sprintf("%d threads of the probe are outside its cgroup: %s", e.stray, detail)
	case e.cg != nil && e.throttled > 0:
		return cpuPass, "the quota is the limit and throttled the spinners: " + detail
	case controlShows:
		return cpuPass, "the spinners stayed within the limit while an unconfined spinner got more: " + detail
	case e.cg != nil:
		return cpuInconclusive, "the quota is the limit but did not bite, and the host is too loaded for the control to show the limit: " + detail
	}
	return cpuInconclusive, "the host is too loaded for the control to show the limit and the probe's cgroup cannot be read: " + detail
}

func checkCPU(ctx context.Context, h *harness) outcome {
	const name = "cpu-limit"
	limits := h.cfg.Limits
	limits.CPUs = min(limits.CPUs, cpuLimit)
	e := cpuEvidence{limit: limits.CPUs, spinners: max(2, runtime.NumCPU())}
	token := "sandboxtest-cpu-" + randomHex(8)
	args := []string{name, strconv.FormatFloat(e.limit, 'f', -1, 64), strconv.Itoa(e.spinners), token}

	if h.cfg.Runtime == sandbox.RuntimeGVisor {
		e.gvisorBefore = gvisorSandboxes()
	}
	stdin, stdinW := io.Pipe()
	stdout := newLineWatch(cpuReady)
	done := make(chan runResult, 1)
	go func() {
		done <- h.exec(ctx, name, runOpts{args: args, limits: &limits, stdin: stdin, stdout: stdout})
	}()
	var r runResult
	select {
	case <-stdout.seen:
		r = h.spinCPU(ctx, &e, token, args, stdinW, done)
	case r = <-done:
	}
	stdinW.Close()
	stdin.Close()
	r.stdout = stdout.capBuffer
	if r.err != nil {
		return fail("%s", r.describe())
	}
	if len(r.leftovers)+len(r.traces) > 0 {
		return fail("the run left things behind: %s", r.describe())
	}
	pr, found := parseResult(r.stdout.bytes(), name)
	switch {
	case !found:
		return fail("the probe printed no result: %s", r.describe())
	case r.resp.ExitCode != 0 || r.resp.TimedOut:
		return fail("probe: %s, but the run did not end cleanly: %s", pr.Detail, r.describe())
	}
	if e.gvisorBefore == nil {
		e.used, e.wall = pr.Values["cpu_seconds"], pr.Values["wall_seconds"]
	} else if e.wall == 0 {
		return fail("under gVisor the suite could not read the sandbox's CPU time on the host: %s (probe: %s)", e.cgErr, pr.Detail)
	}
	v, detail := decideCPU(e)
	switch v {
	case cpuPass:
		return pass("%s", detail)
	case cpuInconclusive:
		return outcome{skip: "inconclusive: " + detail}
	}
	return fail("%s\n(probe: %s)", detail, pr.Detail)
}

// spinCPU runs the spin of the cpu-limit check once the probe waits for
// "go": it finds the probe on the host and reads its cgroup, starts the
// control, lets both spin, reads the throttling, stops both and returns the
// run's result. stdinW is the probe's stdin.
func (h *harness) spinCPU(ctx context.Context, e *cpuEvidence, token string, args []string, stdinW *io.PipeWriter, done <-chan runResult) runResult {
	pid := 0
	for _, p := range probeProcesses(h.bins) {
		if cmd, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline"); err == nil && bytes.Contains(cmd, []byte(token)) {
			pid = p
		}
	}
	if e.gvisorBefore != nil {
		// Under gVisor no host process is the probe: its tasks run in
		// the run's Sentry, whose cgroup is the sandbox's.
		pid, e.cgErr = newGVisorSandbox(e.gvisorBefore)
	}
	if pid == 0 && e.cgErr == "" {
		e.cgErr = "no host process runs the probe with this run's token"
	}
	if pid != 0 {
		if cg, err := hostCPUCgroup(pid); err != nil {
			e.cgErr = err.Error()
		} else {
			e.cg = cg
		}
	}

	// The control: the same probe, unconfined, from a copy the leftover
	// check does not look for.
	ctl := exec.CommandContext(ctx, h.control, "cpu-limit", args[1], args[2], token+"-control")
	ctlOut := newLineWatch(cpuReady)
	ctlErr := newCapBuffer(4 << 10)
	ctl.Stdout, ctl.Stderr = ctlOut, ctlErr
	ctlIn, err := ctl.StdinPipe()
	if err == nil {
		err = ctl.Start()
	}
	ctlDone := make(chan error, 1)
	if err != nil {
		e.controlErr = fmt.Sprintf("starting the control: %v", err)
	} else {
		go func() { ctlDone <- ctl.Wait() }()
		select {
		case <-ctlOut.seen:
		case err := <-ctlDone:
			e.controlErr = fmt.Sprintf("the control ended before spinning: %v: %s", err, ctlErr.tail(300))
		}
	}

	var before uint64
	var beforeFor time.Duration
	var usageBefore time.Duration
	var usageErr error
	if e.gvisorBefore != nil && pid != 0 {
		usageBefore, usageErr = cgroupCPUUsage(pid)
	}
	if e.cg != nil {
		if before, beforeFor, err = e.cg.throttling(); err != nil {
			e.cg, e.cgErr = nil, err.Error()
		}
	}

	// Go: the probe's stdin is a pipe the backend reads; write from a
	// goroutine so that a backend that does not read cannot hang the suite
	// (the run's timeout ends it; closing the pipe frees the writer).
	stop := make(chan struct{})
	go func() {
		if _, err := stdinW.Write([]byte("go\n")); err == nil {
			<-stop
		}
		stdinW.Close()
	}()
	if e.controlErr == "" {
		_, _ = io.WriteString(ctlIn, "go\n")
	}

	var r runResult
	ended := false
	wait := func(d time.Duration) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case r = <-done:
			ended = true
		}
	}
	start := time.Now()
	wait(cpuSpinMin)
	if e.gvisorBefore != nil && pid != 0 && usageErr == nil && !ended {
		// The sandbox's host CPU time over the first spin window (the
		// Sentry's own work included), as the spinners' use.
		after, err := cgroupCPUUsage(pid)
		if err == nil {
			e.used, e.wall = (after - usageBefore).Seconds(), time.Since(start).Seconds()
		} else {
			usageErr = err
		}
	}
	if usageErr != nil {
		e.cgErr = "reading the gVisor sandbox's CPU time: " + usageErr.Error()
	}
	for !ended && e.cg != nil && quotaMatches(e.cg.quota, e.limit) && time.Since(start) < cpuSpinMax {
		n, _, err := e.cg.throttling()
		if err != nil || n > before {
			break
		}
		wait(cpuPoll)
	}
	if e.cg != nil && !ended {
		n, t, err := e.cg.throttling()
		if err != nil {
			e.cg, e.cgErr = nil, "reading the throttling after the spin: "+err.Error()
		} else {
			e.throttled, e.throttledFor = n-before, t-beforeFor
			e.stray = e.cg.strayTasks(pid)
		}
	} else if e.cg != nil {
		e.cg, e.cgErr = nil, "the run ended before the suite stopped the spin"
	}

	close(stop)
	if ctlIn != nil {
		ctlIn.Close()
	}
	if e.controlErr == "" {
		if err := <-ctlDone; err != nil {
			e.controlErr = fmt.Sprintf("the control failed: %v: %s", err, ctlErr.tail(300))
		} else if pr, ok := parseResult(ctlOut.bytes(), "cpu-limit"); !ok {
			e.controlErr = "the control printed no result: " + ctlOut.tail(300)
		} else {
			e.controlUsed, e.controlWall = pr.Values["cpu_seconds"], pr.Values["wall_seconds"]
		}
	}
	if !ended {
		r = <-done
	}
	return r
}

// lineWatch keeps what is written to it and closes seen once it contains
// marker.
type lineWatch struct {
	*capBuffer
	marker []byte
	once   sync.Once
	seen   chan struct{}
}

func newLineWatch(marker string) *lineWatch {
	return &lineWatch{capBuffer: newCapBuffer(1 << 20), marker: []byte(marker), seen: make(chan struct{})}
}

func (w *lineWatch) Write(p []byte) (int, error) {
	n, err := w.capBuffer.Write(p)
	if bytes.Contains(w.capBuffer.bytes(), w.marker) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}
