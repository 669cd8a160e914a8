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

// A stream that is not JSON-RPC does not end the session: each line is
// answered with its JSON-RPC error ("id": null when the id cannot be read)
// and serve ends, exit 0, only at the end of the stream.
func TestMCPServeBrokenStream(t *testing.T) {
	t.Setenv("AGENTNODE_HOME", t.TempDir())
	t.Setenv("AGENTNODE_CONFIG", "")
	var out, errOut bytes.Buffer
	in := "not json at all\n[1,2]\n" + `{"jsonrpc":"2.0","id":7,"method":"ping"}` + "\n"
	code := execute([]string{"mcp", "serve"}, strings.NewReader(in), &out, &errOut)
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: not valid JSON at byte 2: invalid character 'o' in literal null (expecting 'u')"}}
{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: JSON-RPC batches are not part of MCP 2025-06-18 and later (no version negotiated yet): send one message per line"}}
{"jsonrpc":"2.0","id":7,"result":{}}
`
	if code != 0 || out.String() != want {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}
