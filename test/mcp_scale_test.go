package test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpClients are the numbers of concurrent callers BenchmarkMCPServeClients
// measures.
var mcpClients = []int{1, 2, 4}

// BenchmarkMCPServeClients is the concurrency row of `make bench`
// (test/benchtable): tools/call of a curated host tool (mcp-tools echo,
// confined on the host) through one `agentnode mcp serve`, with 1, 2 and 4
// callers at once on the session (stdio carries concurrent requests), side
// by side with the same tool binary run directly with os/exec, the tool's
// own time. Each iteration is one round: the direct run, then for each
// number of callers c, c goroutines making roundCalls calls each, one after
// the other. Reported per c: the median and 90th percentile of one call
// ("c<N>-ms", "c<N>-p90-ms") and the calls per second of the rounds
// ("c<N>-calls/s"); and "direct-ms", "direct-p90-ms".
func BenchmarkMCPServeClients(b *testing.B) {
	e := curatedEnv(b)
	// The calls must not meet the rate limit.
	e.cli(b, "config", "set", "guard.rate_limits.mcp-tools", `{"per_minute":1000000,"per_hour":1000000,"burst":1000000}`)
	cs, _, stderr := e.serve(b, nil)
	call := func() time.Duration {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp-tools__echo", Arguments: map[string]any{"x": 1}})
		d := time.Since(start)
		if err != nil || r.IsError || resultText(r) != `{"x":1}` {
			b.Errorf("tools/call: %v %+v\nstderr: %s", err, r, stderr)
		}
		return d
	}
	tool := filepath.Join(e.dir, "pkg", "bin", "echo") // the installed tool's own binary
	input := []byte(`{"tool":"echo","input":{"x":1}}` + "\n")
	direct := func() time.Duration {
		start := time.Now()
		cmd := exec.Command(tool)
		cmd.Stdin = bytes.NewReader(input)
		out, err := cmd.Output()
		d := time.Since(start)
		if err != nil || !bytes.Contains(out, []byte(`"x":1`)) {
			b.Fatalf("%s: %v %s", tool, err, out)
		}
		return d
	}
	// Warm up past the digest cache's settle time (the installed files
	// count as unchanged only then) so what is measured is a long-running
	// server's steady state.
	until := time.Now().Add(3 * time.Second)
	for time.Now().Before(until) {
		call()
		direct()
	}
	var directs []time.Duration
	lat := map[int][]time.Duration{}
	wall := map[int]time.Duration{}
	calls := map[int]int{}
	b.ResetTimer()
	for b.Loop() {
		directs = append(directs, direct())
		for _, c := range mcpClients {
			d, got := mcpRound(c, call)
			lat[c] = append(lat[c], d...)
			wall[c] += got
			calls[c] += len(d)
		}
		if b.Failed() {
			b.FailNow()
		}
	}
	b.StopTimer()
	report := func(name string, s []time.Duration) {
		slices.Sort(s)
		b.ReportMetric(ms(s[len(s)/2]), name+"-ms")
		b.ReportMetric(ms(s[(len(s)*9)/10]), name+"-p90-ms")
	}
	report("direct", directs)
	for _, c := range mcpClients {
		name := fmt.Sprintf("c%d", c)
		report(name, lat[c])
		b.ReportMetric(float64(calls[c])/wall[c].Seconds(), name+"-calls/s")
	}
}

// roundCalls is how many calls each caller makes in one round.
const roundCalls = 12

// mcpRound runs c callers of call at once, each making roundCalls calls one
// after the other, and returns each call's time and the round's.
func mcpRound(c int, call func() time.Duration) ([]time.Duration, time.Duration) {
	out := make([][]time.Duration, c)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range roundCalls {
				out[i] = append(out[i], call())
			}
		}()
	}
	wg.Wait()
	return slices.Concat(out...), time.Since(start)
}
