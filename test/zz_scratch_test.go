package test

import (
	"os"
	"sync"
	"testing"
	"time"
)

func TestZZScratch(t *testing.T) {
	e := curatedEnv(t)
	e.cli(t, "config", "set", "guard.rate_limits.mcp-tools", `{"per_minute":1000000,"per_hour":1000000,"burst":1000000}`)
	cs, _, stderr := e.serveArgs(t, nil, "--trace")
	until := time.Now().Add(3 * time.Second)
	for time.Now().Before(until) {
		callTool(t, cs, "mcp-tools__echo", map[string]any{"x": 1})
	}
	n := len(stderr.String())
	for range 5 {
		callTool(t, cs, "mcp-tools__echo", map[string]any{"x": 1})
	}
	m := len(stderr.String())
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				callTool(t, cs, "mcp-tools__echo", map[string]any{"x": 1})
			}
		}()
	}
	wg.Wait()
	_ = cs.Close()
	s := stderr.String()
	os.WriteFile("/tmp/h5-seq.txt", []byte(s[n:m]), 0o644)
	os.WriteFile("/tmp/h5-conc.txt", []byte(s[m:]), 0o644)
}
