package test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
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
// ("c<N>-calls/s"); "direct-ms", "direct-p90-ms"; and the CPU time serve,
// its plugins and the tools it ran spent per call ("cpu-ms/call"): with
// the client's own, what bounds the calls per second a machine's cores
// can give.
func BenchmarkMCPServeClients(b *testing.B) {
	e := curatedEnv(b)
	// The calls must not meet the rate limit.
	e.cli(b, "config", "set", "guard.rate_limits.mcp-tools", `{"per_minute":1000000,"per_hour":1000000,"burst":1000000}`)
	cs, serve, stderr := e.serve(b, nil)
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
	cpu0 := serveCPU(b, serve.Process.Pid)
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
	total := 0
	for _, n := range calls {
		total += n
	}
	b.ReportMetric(ms(serveCPU(b, serve.Process.Pid)-cpu0)/float64(total), "cpu-ms/call")
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

// traceLine is one line of `mcp serve --trace`: the call's request id,
// then the line of `agentnode run --trace`.
var traceLine = regexp.MustCompile(`^agentnode: trace ([0-9a-f]+|launch): +([0-9]+\.[0-9]{3}) +([0-9]+\.[0-9]{3})  (\S.*)$`)

// TestMCPServeTrace: `mcp serve --trace` prints, per call, the stage
// timings of `agentnode run --trace` on stderr, each line prefixed with the
// call's request id (the result's agentnode/request_id), in one block per
// call even when calls run at once; plugin launches are traced once, on
// their own; without --trace there is no trace.
func TestMCPServeTrace(t *testing.T) {
	e := curatedEnv(t)
	cs, _, stderr := e.serveArgs(t, nil, "--trace")
	ids := make([]string, 4)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name, wantErr := "mcp-tools__echo", false
			if i == 3 {
				name, wantErr = "mcp-tools__wipe", true // refused: MCP cannot approve a delete
			}
			r := callTool(t, cs, name, map[string]any{"x": 1})
			if r.IsError != wantErr {
				t.Errorf("%s: isError=%v %q", name, r.IsError, resultText(r))
			}
			ids[i], _ = r.Meta["agentnode/request_id"].(string)
		}()
	}
	wg.Wait()
	if err := cs.Close(); err != nil { // serve exits: its stderr is complete
		t.Logf("close: %v", err)
	}
	out := stderr.String()
	// Every trace line parses, and a call's lines are one block.
	byID := map[string][]string{}
	var order []string
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !strings.HasPrefix(line, "agentnode: trace") {
			continue
		}
		m := traceLine.FindStringSubmatch(line)
		if m == nil {
			if !regexp.MustCompile(`^agentnode: trace ([0-9a-f]+|launch): +start_ms +dur_ms +event$`).MatchString(line) {
				t.Errorf("trace line does not parse: %q", line)
			}
			order = append(order, "header")
			continue
		}
		id, start, dur := m[1], m[2], m[3]
		if id != "launch" {
			byID[id] = append(byID[id], start+" "+dur+" "+m[4])
		}
		order = append(order, id)
	}
	// Blocks: a header, then the lines of one id.
	for i := 1; i < len(order); i++ {
		if order[i] != "header" && order[i-1] != "header" && order[i] != order[i-1] {
			t.Errorf("the trace of %s is interleaved with %s's", order[i], order[i-1])
		}
	}
	if !strings.Contains(out, "agentnode: trace launch: ") || !regexp.MustCompile(`(?m)^agentnode: trace launch: .*plugin_launch trust-attest$`).MatchString(out) {
		t.Errorf("no trace of the trust plugin's launch:\n%s", out)
	}
	if n := strings.Count(out, "plugin_launch trust-attest\n"); n != 1 {
		t.Errorf("the trust plugin's launch traced %d times, want once (it is kept warm)", n)
	}
	echoWant := []string{"stage config", "stage lockfile", "stage artifact", "stage trust", "stage minimum_trust",
		"stage placement", "stage policy", "stage rate_limit", "stage inspectors", "stage prompt",
		"audit decision", "stage execute", "audit outcome", "total"}
	for i, id := range ids {
		lines := byID[id]
		if id == "" || len(lines) == 0 {
			t.Errorf("call %d (request id %q): no trace lines:\n%s", i, id, out)
			continue
		}
		var events []string
		var total float64
		ends := map[string]float64{}
		for _, l := range lines {
			f := strings.SplitN(l, " ", 3)
			start, err1 := strconv.ParseFloat(f[0], 64)
			dur, err2 := strconv.ParseFloat(f[1], 64)
			if err1 != nil || err2 != nil || start < 0 || dur < 0 {
				t.Errorf("call %d: bad times in %q", i, l)
			}
			if f[2] == "total" {
				total = dur
			} else {
				events = append(events, f[2])
				ends[f[2]] = start + dur
			}
		}
		if events = append(events, "total"); i == 3 {
			if !slices.Contains(events, "stage prompt [policy_prompt]") || slices.Contains(events, "stage execute") {
				t.Errorf("refused call: trace %q, want it to end at stage prompt [policy_prompt] and not execute", events)
			}
			continue
		}
		var stages []string
		for _, ev := range events {
			if !strings.HasPrefix(ev, "plugin_") {
				stages = append(stages, ev)
			}
		}
		if !slices.Equal(stages, echoWant) {
			t.Errorf("call %d: stages %q\nwant %q", i, stages, echoWant)
		}
		for _, want := range []string{"plugin_call trust-attest Evaluate", "plugin_call guard-builtin Inspect"} {
			if !slices.Contains(events, want) {
				t.Errorf("call %d: no %q in its trace %q", i, want, events)
			}
		}
		for ev, end := range ends {
			if end > total+0.002 {
				t.Errorf("call %d: %s ends at %.3f ms, after the call's total %.3f ms", i, ev, end, total)
			}
		}
	}
}

// Without --trace, mcp serve prints no trace.
func TestMCPServeNoTrace(t *testing.T) {
	e := curatedEnv(t)
	cs, _, stderr := e.serve(t, nil)
	if r := callTool(t, cs, "mcp-tools__echo", map[string]any{"x": 1}); r.IsError {
		t.Fatalf("echo: %q", resultText(r))
	}
	_ = cs.Close()
	if strings.Contains(stderr.String(), "trace") {
		t.Errorf("a trace without --trace:\n%s", stderr)
	}
}

// serveCPU is the CPU time (user and system) spent so far by the process
// pid, the children it waited for (the tools it ran) and its plugin
// processes, from /proc/PID/stat (in clock ticks of 10 ms).
func serveCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	ticks := func(pid int, children bool) int64 {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			b.Fatal(err)
		}
		// pid (comm) state ppid ...: utime is field 14 (f[11]), cstime 17.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
		n, fields := int64(0), f[11:13] // utime, stime
		if children {
			fields = f[11:15] // and cutime, cstime
		}
		for _, s := range fields {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				b.Fatalf("/proc/%d/stat: %v", pid, err)
			}
			n += v
		}
		return n
	}
	n := ticks(pid, true)
	for p := range childPlugins(b, pid) {
		n += ticks(p, false)
	}
	return time.Duration(n) * 10 * time.Millisecond
}
