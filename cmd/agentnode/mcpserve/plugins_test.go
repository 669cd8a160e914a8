package mcpserve

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/agentnode/agentnode/kernel/pluginhost"
)

// closedHost reports whether h refuses because it was closed.
func closedHost(h *pluginhost.Host) bool {
	_, err := h.Trust(context.Background(), "nothing")
	return err != nil && strings.Contains(err.Error(), "plugin host is closed")
}

// A retired host is closed only after its last call returns; later calls
// get a new host; close waits for every host.
func TestPluginPoolRetire(t *testing.T) {
	dir := t.TempDir()
	var made []*pluginhost.Host
	p := &pluginPool{newHost: func() *pluginhost.Host {
		h := pluginhost.New(pluginhost.Options{HomeDir: dir, BinDir: dir})
		made = append(made, h)
		return h
	}}
	a, _ := p.acquire()
	b, _ := p.acquire()
	if a != b || len(made) != 1 {
		t.Fatalf("two calls, %d hosts", len(made))
	}
	p.release(a, true) // a plugin refusal: retire
	if closedHost(made[0]) {
		t.Fatal("closed while a call still uses it")
	}
	c, _ := p.acquire()
	if c == b || len(made) != 2 {
		t.Fatalf("no new host after retiring (%d hosts)", len(made))
	}
	p.release(b, true) // stale again, but no longer current: c stays
	if !closedHost(made[0]) {
		t.Fatal("retired host not closed after its last call")
	}
	d, _ := p.acquire()
	if d != c {
		t.Fatal("a stale release of an old host retired the current one")
	}
	p.release(d, false)
	p.close()
	if _, ok := p.acquire(); ok {
		t.Fatal("acquire after close")
	}
	if closedHost(made[1]) {
		t.Fatal("closed while a call still uses it")
	}
	waited := make(chan struct{})
	go func() { p.open.Wait(); close(waited) }()
	p.release(c, false)
	<-waited
	if !closedHost(made[1]) {
		t.Fatal("host not closed")
	}
}

func TestPluginPoolConcurrent(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var made []*pluginhost.Host
	p := &pluginPool{newHost: func() *pluginhost.Host {
		h := pluginhost.New(pluginhost.Options{HomeDir: dir, BinDir: dir})
		mu.Lock()
		made = append(made, h)
		mu.Unlock()
		return h
	}}
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				g, ok := p.acquire()
				if !ok {
					return
				}
				if closedHost(g.host) {
					t.Error("handed out a closed host")
				}
				p.release(g, (i+j)%7 == 0)
			}
		}()
	}
	wg.Wait()
	p.close()
	p.open.Wait()
	for i, h := range made {
		if !closedHost(h) {
			t.Errorf("host %d of %d left open", i, len(made))
		}
	}
}
