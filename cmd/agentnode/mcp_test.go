package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func TestMCPStatusNotSetUp(t *testing.T) {
	t.Setenv("AGENTNODE_HOME", t.TempDir())
	t.Setenv("AGENTNODE_CONFIG", "")
	code, stdout, stderr := runCLI(t, "mcp", "status")
	if code != 0 || !strings.Contains(stdout, "not set up") || !strings.Contains(stdout, "no tools exposed") {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "mcp", "status", "--json")
	var st struct {
		SetUp   *bool           `json:"set_up"`
		Tools   []any           `json:"tools"`
		Skipped json.RawMessage `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || code != 0 || st.SetUp == nil || *st.SetUp ||
		st.Tools == nil || len(st.Tools) != 0 || string(st.Skipped) != "[]" {
		t.Fatalf("exit %d, %q (%v)", code, stdout, err)
	}
	if code, _, stderr := runCLI(t, "mcp", "status", "extra"); code != 2 || !strings.Contains(stderr, "unknown command") && !strings.Contains(stderr, "accepts 0 arg") {
		t.Fatalf("extra argument: exit %d %q", code, stderr)
	}
}

// In process (stdin and stdout are not the process's own), serve speaks
// MCP on the given streams, writes nothing else to stdout, and returns 0 at
// EOF.
func TestMCPServeStdoutIsOnlyMCP(t *testing.T) {
	t.Setenv("AGENTNODE_HOME", t.TempDir())
	t.Setenv("AGENTNODE_CONFIG", "")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- execute([]string{"mcp", "serve"}, inR, outW, &errOut)
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	// roundTrip sends req and returns the next message on stdout, which
	// must be JSON-RPC.
	roundTrip := func(req string) map[string]any {
		t.Helper()
		if _, err := io.WriteString(inW, req+"\n"); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() {
			t.Fatalf("no answer to %s", req)
		}
		var msg map[string]any
		if err := json.Unmarshal(lines.Bytes(), &msg); err != nil || msg["jsonrpc"] != "2.0" {
			t.Fatalf("stdout line is not JSON-RPC: %q", lines.Text())
		}
		return msg
	}
	init := roundTrip(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	res, _ := init["result"].(map[string]any)
	caps, _ := res["capabilities"].(map[string]any)
	if caps["tools"] == nil {
		t.Fatalf("initialize: %v", init)
	}
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	list := roundTrip(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`)
	if res, _ := list["result"].(map[string]any); res == nil || len(res["tools"].([]any)) != 0 {
		t.Fatalf("tools/list: %v", list)
	}
	if msg := roundTrip(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x__y","arguments":{}}}`); msg["error"] == nil {
		t.Fatalf("unknown tool: %v", msg)
	}
	inW.Close()
	if lines.Scan() {
		t.Fatalf("unexpected output after EOF: %q", lines.Text())
	}
	if code := <-done; code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "not set up") {
		t.Fatalf("stderr %q", errOut.String())
	}
}

// A stream that is not JSON-RPC ends the session (the SDK's transport
// gives up on it): exit 1 with the reason on stderr, nothing on stdout.
func TestMCPServeBrokenStream(t *testing.T) {
	t.Setenv("AGENTNODE_HOME", t.TempDir())
	t.Setenv("AGENTNODE_CONFIG", "")
	var out, errOut bytes.Buffer
	code := execute([]string{"mcp", "serve"}, strings.NewReader("not json at all\n"), &out, &errOut)
	if code != 1 || out.Len() != 0 || !strings.Contains(errOut.String(), "agentnode: mcp serve: ") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}
