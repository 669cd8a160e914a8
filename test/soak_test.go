package test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/plugin"
)

// TestMCPServeSoak makes many tools/call through one `agentnode mcp serve`
// to a curated host tool and holds every process of the server — serve
// itself and each plugin it started — to the memory bounds of the
// performance contract: after a warm-up, the resident set (VmRSS) of no
// process grows by more than 10% over the soak, and at its end each
// plugin's own memory (RssAnon: heap, stacks, runtime; not the pages of its
// executable, which the page cache shares) is at most 20 MiB and serve's at
// most 30 MiB. A short soak here (at least 1,500 warm-up calls, then
// 1,000: the heaps settle within the first 2,000 or so);
// AGENTNODE_SOAK_CALLS sets the measured calls of a long one by hand (e.g.
// 10000).
func TestMCPServeSoak(t *testing.T) {
	const warmup = 1500
	calls := 1000
	if s := os.Getenv("AGENTNODE_SOAK_CALLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("AGENTNODE_SOAK_CALLS=%q: want a positive number", s)
		}
		calls = n
	}
	e := curatedEnv(t)
	// The soak's calls must not meet the rate limit.
	e.cli(t, "config", "set", "guard.rate_limits.mcp-tools", `{"per_minute":1000000,"per_hour":1000000,"burst":1000000}`)
	cs, cmd, stderr := e.serve(t, nil)
	call := func() {
		r := callTool(t, cs, "mcp-tools__echo", map[string]any{"x": 1})
		if r.IsError || resultText(r) != `{"x":1}` {
			t.Fatalf("echo: isError=%v %q\nstderr: %s", r.IsError, resultText(r), stderr)
		}
	}
	// The warm-up outlasts the plugins' start-up collector setting
	// (plugin.SettleAfter): what is measured is the steady state.
	call()
	settled := time.Now().Add(plugin.SettleAfter + time.Second)
	for i := 1; i < warmup || time.Now().Before(settled); i++ {
		call()
	}
	procs := func() map[int]string {
		m := map[int]string{cmd.Process.Pid: "agentnode mcp serve"}
		for pid := range childPlugins(t, cmd.Process.Pid) {
			m[pid] = pluginName(pid)
		}
		return m
	}
	before := procs()
	if len(before) < 3 {
		t.Fatalf("serve runs %d processes after the warm-up, want serve, the trust and the guard plugin: %v", len(before), before)
	}
	start := map[int]memory{}
	for pid := range before {
		start[pid] = memoryOf(t, pid)
	}
	for range calls {
		call()
	}
	after := procs()
	for pid, name := range before {
		if _, ok := after[pid]; !ok {
			t.Errorf("%s was replaced during the soak", name)
			continue
		}
		s, end := start[pid], memoryOf(t, pid)
		limit := int64(20 << 10)
		if pid == cmd.Process.Pid {
			limit = 30 << 10
		}
		t.Logf("%s: VmRSS %d → %d KiB over %d calls (%+.1f%%); RssAnon %d → %d KiB, RssFile %d → %d KiB",
			name, s.rss, end.rss, calls, 100*float64(end.rss-s.rss)/float64(s.rss), s.anon, end.anon, s.file, end.file)
		if end.rss > s.rss+s.rss/10 {
			t.Errorf("%s grew from %d to %d KiB over %d calls (> 10%%)", name, s.rss, end.rss, calls)
		}
		if end.anon > limit {
			t.Errorf("%s holds %d KiB of its own memory after the soak, over its %d KiB bound", name, end.anon, limit)
		}
	}
}

// memory is what a process's status says of its resident set, in KiB.
type memory struct{ rss, anon, file int64 }

func memoryOf(t *testing.T, pid int) memory {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	var m memory
	fields := map[string]*int64{"VmRSS:": &m.rss, "RssAnon:": &m.anon, "RssFile:": &m.file}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if p, ok := fields[f[0]]; ok && len(f) == 3 && f[2] == "kB" {
			if *p, err = strconv.ParseInt(f[1], 10, 64); err != nil {
				t.Fatalf("pid %d: %q: %v", pid, sc.Text(), err)
			}
			delete(fields, f[0])
		}
	}
	if len(fields) != 0 {
		t.Fatalf("pid %d: no %v in its status", pid, fields)
	}
	return m
}

// pluginName is a plugin process's binary name (argv[0]) and pid.
func pluginName(pid int) string {
	cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return fmt.Sprintf("%s (pid %d)", filepath.Base(string(argv0)), pid)
}
