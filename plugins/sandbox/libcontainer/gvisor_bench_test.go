package main

// Start-up cost of a trivial tool (busybox true) under gVisor, side by
// side in one loop (BenchmarkGVisorSideBySide):
//
//	native      this backend's Run, Spec.Runtime native (libcontainer)
//	gvisor      this backend's Run, Spec.Runtime gvisor (runsc)
//	runsc-run   `runsc --network=none --oci-seccomp run` of a bundle whose
//	            config.json is the same profile.ForRun spec, the raw gVisor
//	            run agentnode wraps
//
// Goal: gvisor ≤ 1.10× runsc-run.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// benchGVisorLC returns a func that runs busybox true through the backend
// under gVisor.
func benchGVisorLC(b *testing.B) func() {
	be, fx := setup(b)
	requireRunsc(b, be)
	prefix := fmt.Sprintf("gvbench-%d", os.Getpid())
	return func() {
		id := fmt.Sprintf("%s-%d", prefix, benchSeq.Add(1))
		s := spec(fx, id, "true")
		s.Runtime = sandbox.RuntimeGVisor
		resp, err := be.Run(b.Context(), &sandbox.RunRequest{Spec: s})
		if err != nil {
			b.Fatal(err)
		}
		if resp.ExitCode != 0 || !resp.CleanupVerified {
			b.Fatalf("resp %+v", resp)
		}
	}
}

// benchRunscRaw returns a func that runs the equivalent bundle with
// `runsc run`, with the flags the backend gives it.
func benchRunscRaw(b *testing.B) func() {
	be, fx := setup(b)
	requireRunsc(b, be)
	dir := b.TempDir()
	root := filepath.Join(dir, "state") // runsc's --root
	bundle := filepath.Join(dir, "bundle")
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		b.Fatal(err)
	}
	prefix := fmt.Sprintf("runscbench-%d", os.Getpid())
	s, err := profile.ForRun(spec(fx, prefix, "true"))
	if err != nil {
		b.Fatal(err)
	}
	s.Linux.CgroupsPath = be.cgroupParent + "/" + prefix
	data, err := json.Marshal(s)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o600); err != nil {
		b.Fatal(err)
	}
	var last string
	b.Cleanup(func() {
		if last != "" {
			_ = exec.Command(runscPath, "--root", root, "delete", "--force", last).Run()
		}
		for _, p := range cgroupDirsOf(be, prefix) {
			_ = os.Remove(p)
		}
	})
	return func() {
		last = fmt.Sprintf("%s-%d", prefix, benchSeq.Add(1))
		cmd := exec.Command(runscPath, "--root", root, "--network=none", "--oci-seccomp", "run", "--bundle", bundle, last)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("runsc run: %v\n%s", err, out)
		}
	}
}

// BenchmarkGVisorSideBySide interleaves a native run, a gVisor run and a
// raw runsc run, rotating which goes first (each run warms caches for the
// next), and reports each one's ns/op and the ratios.
func BenchmarkGVisorSideBySide(b *testing.B) {
	fns := []func(){benchLC(b), benchGVisorLC(b), benchRunscRaw(b)}
	var total [3]time.Duration
	n := 0
	for b.Loop() {
		for k := range fns {
			i := (k + n) % len(fns)
			start := time.Now()
			fns[i]()
			total[i] += time.Since(start)
		}
		n++
	}
	per := func(i int) float64 { return float64(total[i].Nanoseconds()) / float64(n) }
	b.ReportMetric(per(0), "native-ns/op")
	b.ReportMetric(per(1), "gvisor-ns/op")
	b.ReportMetric(per(2), "runsc-run-ns/op")
	b.ReportMetric(per(1)/per(2), "gvisor/runsc-run")
	b.ReportMetric(per(1)/per(0), "gvisor/native")
}
