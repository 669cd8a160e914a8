package test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// warmContainers lists the prepared containers (sandbox.warm_pool) of e's
// home under libcontainer's state root: their state names the package
// directory they mount, under e's AGENTNODE_HOME. Another agentnode (or
// test run) on the machine shares the state root.
func warmContainers(e *mcpEnv) []string {
	const stateRoot = "/run/agentnode/libcontainer"
	ents, _ := os.ReadDir(stateRoot)
	var out []string
	for _, ent := range ents {
		if !strings.HasPrefix(ent.Name(), "an-warm-") {
			continue
		}
		st, err := os.ReadFile(filepath.Join(stateRoot, ent.Name(), "state.json"))
		if err != nil || !bytes.Contains(st, []byte(e.home()+"/")) {
			continue
		}
		out = append(out, ent.Name())
	}
	slices.Sort(out)
	return out
}

// waitWarm waits until e has want prepared containers (they are made in
// the background) and returns them.
func waitWarm(t testing.TB, e *mcpEnv, want int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := warmContainers(e)
		if len(got) == want || time.Now().After(deadline) {
			if len(got) != want {
				t.Fatalf("prepared containers of this home: %v, want %d", got, want)
			}
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Through `agentnode mcp serve` (sandbox.warm_pool at its default, one) a
// sandboxed toolpack call leaves a container prepared for the next call
// like it; the next call uses it up (a new one replaces it, never the
// same), the audit records are those of any sandboxed call, and when
// serve exits nothing prepared is left. With size 0 nothing is prepared,
// and a one-shot `agentnode run` never prepares anything.
func TestMCPServeWarmPool(t *testing.T) {
	e := sandboxEnv(t)
	cs, _, stderr := e.serve(t, nil)
	call := func(i int) {
		t.Helper()
		r := callTool(t, cs, "mcp-bench__echo", map[string]any{"x": i})
		if r.IsError || resultText(r) != `{"x":`+strconv.Itoa(i)+`}` || r.Meta["agentnode/placement"] != "sandbox" {
			t.Fatalf("call %d: isError=%v %q meta %v\nstderr: %s", i, r.IsError, resultText(r), r.Meta, stderr)
		}
		id, _ := r.Meta["agentnode/request_id"].(string)
		recs := e.auditRecords(t, id)
		if len(recs) != 2 || recs[0]["decision"] != "allow" || recs[1]["event"] != "outcome" || recs[1]["backend"] != "libcontainer" || recs[1]["exit_code"] != float64(0) {
			t.Fatalf("audit of call %d: %v", i, recs)
		}
	}
	call(0)
	seen := map[string]bool{}
	prev := waitWarm(t, e, 1)
	seen[prev[0]] = true
	for i := 1; i <= 3; i++ {
		call(i) // takes prev[0]
		now := waitWarm(t, e, 1)
		if seen[now[0]] {
			t.Fatalf("call %d: prepared container %s again (used before)", i, now[0])
		}
		seen[now[0]] = true
		prev = now
	}
	_ = cs.Close()
	deadline := time.Now().Add(30 * time.Second)
	for len(warmContainers(e)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := warmContainers(e); len(left) > 0 {
		t.Fatalf("prepared containers left after serve exited: %v\nstderr: %s", left, stderr)
	}

	// One-shot runs prepare nothing.
	out := e.cli(t, "run", "mcp-bench", "echo", "--input", `{"x":9}`)
	if !bytes.Contains(out, []byte(`{"x":9}`)) {
		t.Fatalf("run: %s", out)
	}
	if left := warmContainers(e); len(left) > 0 {
		t.Fatalf("agentnode run prepared containers: %v", left)
	}

	// Size 0: serve prepares nothing either.
	e.cli(t, "config", "set", "sandbox.warm_pool.size", "0")
	cs, _, stderr = e.serve(t, nil)
	for i := range 2 {
		r := callTool(t, cs, "mcp-bench__echo", map[string]any{"x": i})
		if r.IsError {
			t.Fatalf("size 0: %q\nstderr: %s", resultText(r), stderr)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.ListTools(ctx, &mcp.ListToolsParams{}); err != nil { // a round trip after the calls
		t.Fatal(err)
	}
	if left := warmContainers(e); len(left) > 0 {
		t.Fatalf("size 0 prepared containers: %v", left)
	}
}

// BenchmarkMCPServeWarmPool is a sandboxed toolpack call through `agentnode
// mcp serve` with the warm pool (sandbox.warm_pool.size 1, the default:
// "warm"), the same call with the pool off ("cold", size 0), and a curated
// tool on the confined host ("host"), interleaved in one run: one serve
// per variant, the same echo tool binary. Before each call the warm
// serve's next container is ready (untimed), as between the calls of a
// client, so no call competes with a preparation for the CPU. Reported:
// the median and 90th percentile of each ("<name>-ms", "<name>-p90-ms")
// and the ratios of the medians to the host's ("warm/host", "cold/host").
// Goal: warm ≤ 2× host.
func BenchmarkMCPServeWarmPool(b *testing.B) {
	host := curatedEnv(b)
	host.cli(b, "config", "set", "guard.rate_limits.mcp-tools", `{"per_minute":1000000,"per_hour":1000000,"burst":1000000}`)
	sb := sandboxEnv(b)
	sb.cli(b, "config", "set", "guard.rate_limits.mcp-bench", `{"per_minute":1000000,"per_hour":1000000,"burst":1000000}`)
	sb.cli(b, "config", "set", "sandbox.warm_pool.size", "0")
	coldCS, _, coldErr := sb.serve(b, nil)
	sb.cli(b, "config", "set", "sandbox.warm_pool.size", "1")
	warmCS, _, warmErr := sb.serve(b, nil)
	hostCS, _, hostErr := host.serve(b, nil)
	first := true
	caller := func(cs *mcp.ClientSession, tool string, stderr *lockedBuffer) func() time.Duration {
		return func() time.Duration {
			if !first {
				waitWarm(b, sb, 1) // untimed
			}
			first = false
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"x": 1}})
			d := time.Since(start)
			if err != nil || r.IsError || resultText(r) != `{"x":1}` {
				b.Fatalf("%s: %v %+v\nstderr: %s", tool, err, r, stderr)
			}
			return d
		}
	}
	names := []string{"host", "warm", "cold"}
	calls := []func() time.Duration{
		caller(hostCS, "mcp-tools__echo", hostErr),
		caller(warmCS, "mcp-bench__echo", warmErr),
		caller(coldCS, "mcp-bench__echo", coldErr),
	}
	calls[1]() // the first call of the warm serve is cold; it starts the pool
	// Past the digest cache's settle time (the installed files count as
	// unchanged only then): a long-running server's steady state.
	until := time.Now().Add(3 * time.Second)
	for time.Now().Before(until) {
		for _, c := range calls {
			c()
		}
	}
	samples := make([][]time.Duration, len(calls))
	b.ResetTimer()
	for b.Loop() {
		for i, c := range calls {
			samples[i] = append(samples[i], c())
		}
	}
	b.StopTimer()
	med := map[string]float64{}
	for i, name := range names {
		s := samples[i]
		slices.Sort(s)
		med[name] = ms(s[len(s)/2])
		b.ReportMetric(med[name], name+"-ms")
		b.ReportMetric(ms(s[(len(s)*9)/10]), name+"-p90-ms")
	}
	b.ReportMetric(med["warm"]/med["host"], "warm/host")
	b.ReportMetric(med["cold"]/med["host"], "cold/host")
}
