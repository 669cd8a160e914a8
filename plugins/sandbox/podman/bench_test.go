package main

// Start-up cost, side by side, of a hardened trivial tool (busybox true):
//
//	BenchmarkPodmanBackendTrivial  this backend's Run, in-process: podman
//	                               run --rm, the exit status and removal
//	                               proof from podman's state (libpod's
//	                               database, storage's container lists),
//	                               cgroups, mounts, storage directories
//	BenchmarkPodmanRunCLI          `podman run --rm` with exactly the same
//	                               global options, flags, environment and
//	                               containers.conf, and nothing after it
//	BenchmarkPodmanSideBySide      the two interleaved in one loop, with
//	                               ns/op of each and the ratio as metrics
//	BenchmarkPodmanGVisorSideBySide the same under gVisor (Spec.Runtime
//	                               gvisor; `podman --runtime runsc run --rm`
//	                               with the same runsc flags)
//
// Goal: backend ≤ 1.10× the CLI.

import (
	"fmt"
	"os"
	"path/filepath"
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
	be, fx := setup(b)
	prefix := fmt.Sprintf("bench-%d", os.Getpid())
	b.Cleanup(func() { sweep(prefix) })
	return func() {
		id := fmt.Sprintf("%s-%d", prefix, benchSeq.Add(1))
		s := spec(fx, id, "true")
		s.Runtime = rt
		resp, err := be.Run(b.Context(), &sandbox.RunRequest{Spec: s})
		if err != nil {
			b.Fatal(err)
		}
		if resp.ExitCode != 0 || !resp.CleanupVerified {
			b.Fatalf("resp %+v", resp)
		}
	}
}

// benchCLI returns a func that runs the same container with
// `podman run --rm` and the backend's flags (and, for gVisor, its runtime
// options).
func benchCLI(b *testing.B, rt string) func() {
	be, fx := setup(b)
	e, err := be.engine(b.Context())
	if err == nil {
		e, err = e.forRuntime(rt)
	}
	if err != nil {
		b.Fatal(err)
	}
	prefix := fmt.Sprintf("clibench-%d", os.Getpid())
	b.Cleanup(func() { sweep(prefix) })
	return func() {
		id := fmt.Sprintf("%s-%d", prefix, benchSeq.Add(1))
		s, err := profile.ForRun(spec(fx, id, "true"))
		if err != nil {
			b.Fatal(err)
		}
		nonce := randomHex(16)
		cidfile := filepath.Join(e.stateDir, "cid-"+nonce)
		args, err := runArgs(s, runParams{
			runID: id, nonce: nonce, owner: be.owner, imageID: strings.TrimPrefix(fx.Img.ConfigDigest, "sha256:"),
			cidfile: cidfile, seccompFile: e.seccompFile, cgroupParent: be.cgroupParent, autoRemove: true,
		})
		if err != nil {
			b.Fatal(err)
		}
		cmd := e.command(args...)
		out, err := cmd.CombinedOutput()
		_ = os.Remove(cidfile)
		if err != nil {
			b.Fatalf("podman run --rm: %v\n%s", err, out)
		}
	}
}

// sweep removes anything a failed benchmark left under prefix.
func sweep(prefix string) {
	out, _ := podmanCLI("ps", "--all", "--quiet", "--no-trunc", "--filter", "name=^"+namePrefix+prefix)
	for _, c := range strings.Fields(out) {
		_, _ = podmanCLI("rm", "--force", "--time", "0", c)
	}
}

func BenchmarkPodmanBackendTrivial(b *testing.B) {
	f := benchBackend(b, "")
	f() // the probe and the first image access happen outside the loop
	for b.Loop() {
		f()
	}
}

func BenchmarkPodmanRunCLI(b *testing.B) {
	f := benchCLI(b, "")
	f()
	for b.Loop() {
		f()
	}
}

// BenchmarkPodmanSideBySide interleaves the two so that both cores' load
// affects them alike, and reports each one's ns/op and the ratio.
func BenchmarkPodmanSideBySide(b *testing.B) { podmanSideBySide(b, "") }

// BenchmarkPodmanGVisorSideBySide is BenchmarkPodmanSideBySide under gVisor.
func BenchmarkPodmanGVisorSideBySide(b *testing.B) {
	requireRunsc(b)
	podmanSideBySide(b, sandbox.RuntimeGVisor)
}

func podmanSideBySide(b *testing.B, rt string) {
	fns := []func(){benchBackend(b, rt), benchCLI(b, rt)}
	for _, f := range fns {
		f()
	}
	var total [2]time.Duration
	n := 0
	for b.Loop() {
		for i, f := range fns {
			start := time.Now()
			f()
			total[i] += time.Since(start)
		}
		n++
	}
	per := func(i int) float64 { return float64(total[i].Nanoseconds()) / float64(n) }
	b.ReportMetric(per(0), "backend-ns/op")
	b.ReportMetric(per(1), "podman-run-rm-ns/op")
	b.ReportMetric(per(0)/per(1), "backend/podman-run")
}
