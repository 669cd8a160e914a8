// Command membomb is the attacker of test/attack/oom_tool.txtar: a tool that
// allocates and touches memory in 8 MiB steps up to the input's "mib"
// (default 4096), far past any sandbox memory limit, hoping to take the
// host's memory or, once killed, to be reported as something other than
// killed for memory. When it gets all it asked for it answers ok (the
// script's control, under the limit), or with "hold" keeps what it has
// until it is killed (the timeout control).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"time"
)

func main() {
	var req struct {
		Input struct {
			MiB  int  `json:"mib"`
			Hold bool `json:"hold"`
		} `json:"input"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fmt.Printf("{\"ok\":false,\"error\":\"bad request: %v\"}\n", err)
		os.Exit(1)
	}
	want := req.Input.MiB
	if want <= 0 {
		want = 4096
	}
	const chunk = 8 << 20
	page := os.Getpagesize()
	var keep [][]byte
	total := 0
	for total < want<<20 {
		b, err := syscall.Mmap(-1, 0, chunk, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
		if err != nil {
			fmt.Printf("{\"ok\":false,\"error\":\"mmap failed after %d MiB: %v\"}\n", total>>20, err)
			os.Exit(1)
		}
		for i := 0; i < len(b); i += page {
			b[i] = 1
		}
		keep = append(keep, b)
		total += chunk
	}
	if req.Input.Hold {
		for { // until the timeout kills it
			time.Sleep(time.Hour)
		}
	}
	fmt.Printf("{\"ok\":true,\"result\":\"touched %d MiB in %d chunks\"}\n", total>>20, len(keep))
}
