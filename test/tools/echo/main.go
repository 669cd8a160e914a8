// Command echo is a trivial tool for benchmarks and tests: it reads one tool
// I/O request from stdin and answers {"ok":true,"result":<the input>}.
package main

import (
	"encoding/json"
	"os"
)

func main() {
	var req struct {
		Tool  string          `json:"tool"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"ok": false, "error": "bad request"})
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"ok": true, "result": req.Input})
}
