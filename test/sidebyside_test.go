package test

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
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

// logTrace logs, from the stderr of an `mcp serve --trace`, each traced
// event's median and 90th percentile duration over the calls (where a
// call's time goes); it fails b if nothing was traced.
func logTrace(b *testing.B, stderr string) {
	b.Helper()
	durs := map[string][]float64{}
	for _, line := range strings.Split(stderr, "\n") {
		_, rest, ok := strings.Cut(line, "agentnode: trace ")
		if !ok || strings.HasPrefix(rest, "launch") {
			continue
		}
		_, rest, _ = strings.Cut(rest, ": ")
		f := strings.Fields(rest)
		if len(f) < 3 {
			continue
		}
		d, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue // the header
		}
		ev := strings.Join(f[2:], " ")
		durs[ev] = append(durs[ev], d)
	}
	if len(durs) == 0 {
		b.Fatalf("no trace in serve's stderr:\n%s", stderr)
	}
	for _, d := range durs {
		slices.Sort(d)
	}
	names := slices.SortedFunc(maps.Keys(durs), func(x, y string) int {
		return cmp.Compare(durs[y][len(durs[y])/2], durs[x][len(durs[x])/2])
	})
	var out strings.Builder
	for _, ev := range names {
		d := durs[ev]
		fmt.Fprintf(&out, "\n%-48s n=%4d p50 %7.3f ms  p90 %7.3f ms", ev, len(d), d[len(d)/2], d[len(d)*9/10])
	}
	b.Logf("where a call's time went (mcp serve --trace), by median:%s", out.String())
}
