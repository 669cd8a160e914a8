package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// pidsSlack is how far past the pids limit the fork bomb goes before it
// gives up and reports that the limit did not hold.
const pidsSlack = 64

// pidsAllowance is how many tasks beyond the limit the check tolerates
// (an engine's init helper counted differently, a thread the runtime added).
const pidsAllowance = 8

// checkPidsLimit: PIDS. Fork children (raw forks that pause) until fork
// fails; that must happen before the children and this process's threads
// number more than PIDS+pidsAllowance. The children are killed and reaped
// either way.
func checkPidsLimit(args []string) (bool, string) {
	limit, err := strconv.Atoi(arg(args, 0))
	if err != nil || limit <= 0 {
		return false, fmt.Sprintf("bad PIDS argument %q", arg(args, 0))
	}
	if !rawSupported {
		return false, "cannot run on " + runtime.GOARCH
	}
	// The children's parent-death signal is tied to this thread; no GC or
	// new threads while pids are exhausted.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	stop := limit + pidsSlack
	pids := make([]int, 0, stop)
	var ferr error
	for len(pids) < stop {
		r := forkPause()
		if r < 0 {
			ferr = rawErr(r)
			break
		}
		pids = append(pids, int(r))
	}
	threads := 0
	if ents, err := os.ReadDir("/proc/self/task"); err == nil {
		threads = len(ents)
	}
	for _, p := range pids {
		_ = unix.Kill(p, unix.SIGKILL)
	}
	for _, p := range pids {
		_, _ = reap(p)
	}
	n := len(pids)
	switch {
	case ferr == nil:
		return false, fmt.Sprintf("forked %d children (limit %d) and fork still worked: no pids limit", n, limit)
	case n+threads > limit+pidsAllowance:
		return false, fmt.Sprintf("fork failed (%s) only after %d children + %d threads, more than the limit %d", errText(ferr), n, threads, limit)
	case !errors.Is(ferr, unix.EAGAIN):
		return true, fmt.Sprintf("fork failed with %s (not EAGAIN) after %d children + %d threads (limit %d)", errText(ferr), n, threads, limit)
	}
	return true, fmt.Sprintf("fork failed with %s after %d children + %d threads (limit %d)", errText(ferr), n, threads, limit)
}

// memoryOvershoot is how much more than the limit the memory bomb tries to
// allocate and touch.
const memoryOvershoot = 4

// checkMemoryLimit: BYTES. Map and touch anonymous memory up to
// memoryOvershoot×BYTES. The sandbox holds when the process is killed on the
// way (the suite sees exit 137) or the mapping fails; reaching the target
// fails the check.
func checkMemoryLimit(args []string) (bool, string) {
	limit, err := strconv.ParseInt(arg(args, 0), 10, 64)
	if err != nil || limit <= 0 {
		return false, fmt.Sprintf("bad BYTES argument %q", arg(args, 0))
	}
	const chunk = 8 << 20
	page := os.Getpagesize()
	target := memoryOvershoot * limit
	var total int64
	for total < target {
		b, err := unix.Mmap(-1, 0, chunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return true, fmt.Sprintf("mmap failed after %d bytes (limit %d): %s", total, limit, errText(err))
		}
		for i := 0; i < len(b); i += page {
			b[i] = 1
		}
		total += chunk
		if total%(32<<20) == 0 {
			fmt.Fprintf(os.Stderr, "probe: touched %d MiB\n", total>>20)
		}
	}
	return false, fmt.Sprintf("allocated and touched %d bytes, %d× the limit %d, and was not stopped", total, memoryOvershoot, limit)
}

const (
	cpuSpin  = 2 * time.Second // spin time of a run without the suite's handshake
	cpuSlack = 1.3
)

// cpuReady is the line the cpu-limit check prints to stdout once it waits
// for the suite's "go".
const cpuReady = "cpu-limit-ready"

// checkCPULimit: CPUS SPINNERS [TOKEN]. Prints cpuReady and waits for a
// line on stdin: after "go", SPINNERS goroutines spin (GOMAXPROCS SPINNERS)
// until the next line or the end of stdin; when stdin ends before "go" they
// spin for cpuSpin instead. It measures the CPU time used (getrusage, all
// threads) per second of wall time: ok when it stays within CPUS×cpuSlack.
// The suite decides the check itself (checks.go) from this measurement,
// reported in the result's values, and from what it reads on the host at
// the same time: the suite stops the spin only after reading the cgroup's
// throttling counters, so the process and its cgroup are still there when
// it reads them. TOKEN only marks the command line, so that the suite finds
// this process on the host.
func checkCPULimit(args []string) (bool, string) {
	cpus, err := strconv.ParseFloat(arg(args, 0), 64)
	if err != nil || cpus <= 0 {
		return false, fmt.Sprintf("bad CPUS argument %q", arg(args, 0))
	}
	spinners, err := strconv.Atoi(arg(args, 1))
	if err != nil || spinners <= 0 {
		return false, fmt.Sprintf("bad SPINNERS argument %q", arg(args, 1))
	}
	runtime.GOMAXPROCS(spinners)
	fmt.Println(cpuReady)
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadString('\n')
	handshake := err == nil && strings.TrimSpace(line) == "go"
	if err == nil && !handshake {
		return false, fmt.Sprintf("expected \"go\" on stdin, got %q", line)
	}
	var before, after unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &before); err != nil {
		return false, "getrusage: " + err.Error()
	}
	start := time.Now()
	var done atomic.Bool
	var wg sync.WaitGroup
	for range spinners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := uint64(1)
			for !done.Load() {
				for i := 0; i < 1<<16; i++ {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
			_ = x
		}()
	}
	if handshake {
		_, _ = in.ReadString('\n') // "stop", or the end of stdin
	} else {
		time.Sleep(cpuSpin)
	}
	done.Store(true)
	wg.Wait()
	wall := time.Since(start)
	if err := unix.Getrusage(unix.RUSAGE_SELF, &after); err != nil {
		return false, "getrusage: " + err.Error()
	}
	used := tv(after.Utime) + tv(after.Stime) - tv(before.Utime) - tv(before.Stime)
	ratio := used.Seconds() / wall.Seconds()
	values = map[string]float64{"cpu_seconds": used.Seconds(), "wall_seconds": wall.Seconds()}
	detail := fmt.Sprintf("%d spinners used %v CPU in %v wall: %.2f CPUs, limit %.2f (allowed up to %.2f)",
		spinners, used.Round(time.Millisecond), wall.Round(time.Millisecond), ratio, cpus, cpus*cpuSlack)
	return ratio <= cpus*cpuSlack, detail
}

func tv(t unix.Timeval) time.Duration {
	return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
}

// rlimitWants are the resource limits the profile sets (specs/sandbox
// profile.json), each with the highest hard limit accepted (0 for CORE).
var rlimitWants = []struct {
	name     string
	resource int
	max      uint64
}{
	{"NOFILE", unix.RLIMIT_NOFILE, 1024},
	{"NPROC", unix.RLIMIT_NPROC, 1 << 20},
	{"CORE", unix.RLIMIT_CORE, 0},
	{"FSIZE", unix.RLIMIT_FSIZE, 1 << 30},
}

// checkRlimits: every limit of rlimitWants is set (soft = hard, hard at
// most its max), and raising its hard limit by one fails.
func checkRlimits([]string) (bool, string) {
	var details []string
	ok := true
	for _, w := range rlimitWants {
		var r unix.Rlimit
		if err := unix.Getrlimit(w.resource, &r); err != nil {
			return false, fmt.Sprintf("getrlimit %s: %v", w.name, err)
		}
		details = append(details, fmt.Sprintf("%s %d/%d", w.name, r.Cur, r.Max))
		if r.Max > w.max || r.Cur != r.Max {
			ok = false
			details = append(details, fmt.Sprintf("(want soft = hard <= %d)", w.max))
			continue
		}
		raised := unix.Rlimit{Cur: r.Cur, Max: r.Max + 1}
		if err := unix.Setrlimit(w.resource, &raised); err == nil {
			ok = false
			details = append(details, fmt.Sprintf("(raised %s to %d)", w.name, raised.Max))
		}
	}
	return ok, strings.Join(details, "; ")
}
