package test

import (
	"bytes"
	"slices"
	"testing"
	"time"
)

// variant is one of the calls a side-by-side benchmark compares: agentnode
// doing some work, or the raw counterpart doing the same work.
type variant struct {
	name string
	// call does the work once.
	call func()
}

// sideBySide runs the variants in turn, once each per iteration, so that
// whatever else the machine does affects them alike, and reports for each
// the median and 90th percentile of its own samples ("<name>-ms",
// "<name>-p90-ms"). Medians, not means: one call delayed by
// the machine moves a mean and not a median. `make bench` (test/benchtable)
// reads these metrics to print the table of the README's performance
// section.
func sideBySide(b *testing.B, vs []variant) {
	b.Helper()
	for _, v := range vs {
		v.call() // warm caches (page cache, verdicts, digests)
	}
	samples := make([][]time.Duration, len(vs))
	b.ResetTimer()
	for b.Loop() {
		for i, v := range vs {
			start := time.Now()
			v.call()
			samples[i] = append(samples[i], time.Since(start))
		}
	}
	b.StopTimer()
	for i, v := range vs {
		s := slices.Clone(samples[i])
		slices.Sort(s)
		b.ReportMetric(ms(s[len(s)/2]), v.name+"-ms")
		b.ReportMetric(ms(s[(len(s)*9)/10]), v.name+"-p90-ms")
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// timedCLI runs agentnode like cli and fails b unless it succeeds with
// want in its output.
func timedCLI(b *testing.B, env []string, want []byte, args ...string) {
	b.Helper()
	out, err := cliCmd(env, args...).CombinedOutput()
	if err != nil || !bytes.Contains(out, want) {
		b.Fatalf("agentnode %v: %v\n%s", args, err, out)
	}
}
