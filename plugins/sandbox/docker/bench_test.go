package main

// Start-up cost, side by side, of a hardened trivial tool (busybox true):
//
//	BenchmarkDockerBackendTrivial  this backend's Run, in-process: create,
//	                               inspect (hardening check), attach, wait,
//	                               start, exit, remove, and the removal
//	                               proven (inspect ×2, list, host mounts and
//	                               cgroups)
//	BenchmarkDockerRunCLI          `docker run --rm -i` with the same flags
//	                               (AgentNode's, plus what makes the two
//	                               containers the same: HOME tmpfs, ulimits,
//	                               cgroupns/ipc private, hostname, log
//	                               driver none, env, workdir, entrypoint)
//	BenchmarkDockerSideBySide      the two interleaved in one loop, with
//	                               ns/op of each and the ratio as metrics
//
// Goal: backend ≤ 1.10× docker run.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

var benchSeq atomic.Int64

// benchBackend returns a func that runs busybox true through the backend
// under runtime rt ("" native).
func benchBackend(b *testing.B, rt string) func() {
	e := testEnv(b)
	be := newTestBackend(b, e)
	pack := packDir(b)
	prefix := fmt.Sprintf("bench-%d", os.Getpid())
	return func() {
		id := fmt.Sprintf("%s-%d", prefix, benchSeq.Add(1))
		s := spec(e, pack, id, "true")
		s.Runtime = rt
		resp, err := be.Run(b.Context(), &sandbox.RunRequest{Spec: s})
		if err != nil {
			forceRemoveRun(e, id)
			b.Fatal(err)
		}
		if resp.ExitCode != 0 || !resp.CleanupVerified {
			b.Fatalf("resp %+v", resp)
		}
	}
}

// cliArgs is `docker run` for the container the backend makes for args.
func cliArgs(tb testing.TB, e *dockerEnv, pack, name string, args ...string) []string {
	cs, err := containerConfig(spec(e, pack, name, args...), e.img.ConfigDigest, "")
	if err != nil {
		tb.Fatal(err)
	}
	seccomp := filepath.Join(tb.TempDir(), "seccomp.json")
	if err := os.WriteFile(seccomp, profile.SeccompDockerJSON(), 0o644); err != nil {
		tb.Fatal(err)
	}
	h, c := cs.host, cs.config
	argv := []string{"run", "--rm", "-i",
		// AgentNode's flags.
		"--read-only", "--cap-drop=ALL", "--security-opt=no-new-privileges", "--security-opt", "seccomp=" + seccomp,
		"--user", c.User, "--network", "none",
		"--pids-limit", strconv.FormatInt(*h.PidsLimit, 10),
		"--memory", strconv.FormatInt(h.Memory, 10), "--memory-swap", strconv.FormatInt(h.MemorySwap, 10),
		"--cpus", strconv.FormatFloat(float64(h.NanoCPUs)/1e9, 'f', -1, 64),
		"--tmpfs", "/tmp:" + h.Tmpfs["/tmp"],
		"-v", pack + ":/pack:ro",
		// The rest of the profile, as the backend sets it.
		"--tmpfs", profile.HomeDir + ":" + h.Tmpfs[profile.HomeDir],
		"--cgroupns", "private", "--ipc", "private", "--shm-size", strconv.FormatInt(h.ShmSize, 10),
		"--hostname", c.Hostname, "--log-driver", "none", "--workdir", c.WorkingDir,
		"--label", runLabel + "=" + name,
	}
	for _, u := range h.Ulimits {
		argv = append(argv, "--ulimit", fmt.Sprintf("%s=%d:%d", u.Name, u.Soft, u.Hard))
	}
	for _, kv := range c.Env {
		argv = append(argv, "-e", kv)
	}
	argv = append(argv, "--entrypoint", c.Entrypoint[0], c.Image)
	return append(argv, c.Cmd...)
}

// benchCLI returns a func that runs the same container with `docker run`
// (`--runtime runsc` for gVisor).
func benchCLI(b *testing.B, rt string) func() {
	e := testEnv(b)
	docker := lookTool("docker")
	pack := packDir(b)
	prefix := fmt.Sprintf("clibench-%d", os.Getpid())
	argv := cliArgs(b, e, pack, prefix, "true")
	if rt == sandbox.RuntimeGVisor {
		argv = append([]string{argv[0], "--runtime", GVisorRuntime}, argv[1:]...)
	}
	b.Cleanup(func() { forceRemoveRun(e, prefix) })
	return func() {
		cmd := exec.Command(docker, argv...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			b.Fatalf("docker run: %v\n%s", err, out.String())
		}
	}
}

func BenchmarkDockerBackendTrivial(b *testing.B) {
	f := benchBackend(b, "")
	f() // warm: client negotiation, image cache
	for b.Loop() {
		f()
	}
}

func BenchmarkDockerRunCLI(b *testing.B) {
	f := benchCLI(b, "")
	f()
	for b.Loop() {
		f()
	}
}

// BenchmarkDockerSideBySide interleaves the two, so that the load of both
// cores affects them alike, and reports each one's ns/op (mean and median)
// and the ratios.
func BenchmarkDockerSideBySide(b *testing.B) { dockerSideBySide(b, "") }

// BenchmarkDockerGVisorSideBySide is BenchmarkDockerSideBySide under
// gVisor: the backend with Spec.Runtime gvisor against `docker run
// --runtime runsc`, same flags.
func BenchmarkDockerGVisorSideBySide(b *testing.B) {
	requireRunsc(b)
	dockerSideBySide(b, sandbox.RuntimeGVisor)
}

func dockerSideBySide(b *testing.B, rt string) {
	fns := []func(){benchBackend(b, rt), benchCLI(b, rt)}
	for _, f := range fns {
		f()
	}
	var samples [2][]time.Duration
	for b.Loop() {
		for i, f := range fns {
			start := time.Now()
			f()
			samples[i] = append(samples[i], time.Since(start))
		}
	}
	mean := func(s []time.Duration) float64 {
		var t time.Duration
		for _, d := range s {
			t += d
		}
		return float64(t.Nanoseconds()) / float64(len(s))
	}
	median := func(s []time.Duration) float64 {
		c := append([]time.Duration(nil), s...)
		sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
		return float64(c[len(c)/2].Nanoseconds())
	}
	b.ReportMetric(mean(samples[0]), "backend-ns/op")
	b.ReportMetric(mean(samples[1]), "docker-run-ns/op")
	b.ReportMetric(mean(samples[0])/mean(samples[1]), "backend/docker-run")
	b.ReportMetric(median(samples[0])/median(samples[1]), "median-backend/docker-run")
}

// TestCLIEquivalent: the benchmark's `docker run` is accepted and gives the
// container the same identity, privileges and limits as the backend's.
func TestCLIEquivalent(t *testing.T) {
	e := testEnv(t)
	pack := packDir(t)
	id := newRunID(t, e, "cli")
	script := `grep -E '^(NoNewPrivs|Seccomp|CapEff|CapBnd):' /proc/self/status; id -u; ulimit -n; hostname; cat /pack/hello.txt`
	out, err := exec.Command(lookTool("docker"), cliArgs(t, e, pack, id, "sh", "-c", script)...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker run: %v\n%s", err, out)
	}
	want := "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n1000\n1024\nsandbox\nfrom the pack\n"
	if got := strings.ReplaceAll(string(out), "\r", ""); !strings.Contains(got, want) {
		t.Errorf("docker run printed %q, want %q", got, want)
	}
	assertGone(t, e, id)
}
