package test

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// `agentnode mcp serve` fed bad input by hand, line by line, as a broken or
// hostile client would: every bad line gets its JSON-RPC error answer, in
// the client's terms, and the same process keeps serving.

// wireServer is a running `agentnode mcp serve` spoken to in raw lines.
type wireServer struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *lockedBuffer
}

func (e *mcpEnv) serveWire(t *testing.T, args ...string) *wireServer {
	t.Helper()
	cmd := e.command(append([]string{"mcp", "serve"}, args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &wireServer{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 16), stderr: &lockedBuffer{}}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return s
}

func (s *wireServer) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.stdin, line+"\n"); err != nil {
		s.t.Fatalf("write to mcp serve: %v\nstderr: %s", err, s.stderr)
	}
}

// wireAnswer is one JSON-RPC answer as sent.
type wireAnswer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// next returns the next line the server writes (a generous bound: a
// server that stopped answering fails here rather than hanging the suite).
func (s *wireServer) next() string {
	s.t.Helper()
	select {
	case l, ok := <-s.lines:
		if !ok {
			s.t.Fatalf("mcp serve closed its output\nstderr: %s", s.stderr)
		}
		return l
	case <-time.After(60 * time.Second):
		s.t.Fatalf("no answer from mcp serve\nstderr: %s", s.stderr)
	}
	return ""
}

func (s *wireServer) answer() wireAnswer {
	s.t.Helper()
	l := s.next()
	var a wireAnswer
	if err := json.Unmarshal([]byte(l), &a); err != nil {
		s.t.Fatalf("answer %q: %v", l, err)
	}
	if a.JSONRPC != "2.0" {
		s.t.Fatalf("answer without jsonrpc 2.0: %s", l)
	}
	return a
}

// initialize runs the MCP handshake.
func (s *wireServer) initialize(version string) {
	s.t.Helper()
	s.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{},"clientInfo":{"name":"wire-test","version":"1"}}}`)
	if a := s.answer(); string(a.ID) != `"init"` || a.Error != nil {
		s.t.Fatalf("initialize: %+v", a)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// toolText returns the text of a tools/call result and whether it is a
// tool error, and its agentnode/request_id.
func toolText(t *testing.T, a wireAnswer) (text string, isError bool, requestID string) {
	t.Helper()
	if a.Error != nil {
		t.Fatalf("tools/call: protocol error %d %q", a.Error.Code, a.Error.Message)
	}
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool           `json:"isError"`
		Meta    map[string]any `json:"_meta"`
	}
	if err := json.Unmarshal(a.Result, &r); err != nil {
		t.Fatalf("tools/call result %s: %v", a.Result, err)
	}
	for _, c := range r.Content {
		text += c.Text
	}
	id, _ := r.Meta["agentnode/request_id"].(string)
	return text, r.IsError, id
}

// goTerms are what must never reach a client: Go type and package names.
var goTerms = []string{"Go struct", "Go value", "mcp.", "*mcp", "json:", "unmarshal", "interface {}", "map["}

func TestMCPServeMalformedInput(t *testing.T) {
	e := curatedEnv(t)
	s := e.serveWire(t)
	s.initialize("2025-06-18")

	// echo proves the process still serves: a real call, decided, run and
	// audited.
	n := 0
	echo := func(after string) {
		t.Helper()
		n++
		s.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(1000+n) + `,"method":"tools/call","params":{"name":"mcp-tools__echo","arguments":{"x":` + strconv.Itoa(n) + `}}}`)
		a := s.answer()
		text, isErr, _ := toolText(t, a)
		if string(a.ID) != strconv.Itoa(1000+n) || isErr || text != `{"x":`+strconv.Itoa(n)+`}` {
			t.Fatalf("echo after %s: id %s isError=%v %q\nstderr: %s", after, a.ID, isErr, text, s.stderr)
		}
	}
	echo("the handshake")

	huge := `{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"mcp-tools__echo","arguments":{"s":"` +
		strings.Repeat("a", 3<<20) + `"}}}`
	cases := []struct {
		name, line string
		id         string // the id answered; "null" when the server cannot tell
		code       int
		message    string // a part of the message
	}{
		{"garbage", "garbage, not JSON", "null", -32700, "not valid JSON at byte 1"},
		{"truncated", `{"jsonrpc":"2.0","id":5,"method":`, "null", -32700, "not valid JSON"},
		{"binary", "\x00\x01\xff{", "null", -32700, "not valid JSON"},
		{"batch", `[{"jsonrpc":"2.0","id":6,"method":"ping"},{"jsonrpc":"2.0","id":7,"method":"ping"}]`, "null", -32600,
			"JSON-RPC batches are not part of MCP 2025-06-18 and later (this session: MCP 2025-06-18)"},
		{"empty batch", `[]`, "null", -32600, "an empty batch"},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":8,"method":"tools/list"}`, "8", -32600, `"jsonrpc" is "1.0"; it must be "2.0"`},
		{"no jsonrpc", `{"id":9,"method":"tools/list"}`, "9", -32600, `"jsonrpc" is missing`},
		{"not an object", `42`, "null", -32600, "a JSON-RPC message is a JSON object, not a number"},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, "null", -32600, `"id" must be a string or an integer, not null`},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, "null", -32600, `"id" must be a string or an integer`},
		{"method a number", `{"jsonrpc":"2.0","id":10,"method":5}`, "10", -32600, `"method" must be a string, not a number`},
		{"neither request nor response", `{"jsonrpc":"2.0","id":11}`, "11", -32600, `a request needs a "method"`},
		{"over the size bound", huge, "null", -32600, "the message is longer than"},
		{"too deep", strings.Repeat("[", 1500) + strings.Repeat("]", 1500), "null", -32600, "nested deeper than 1000 levels"},
		{"unknown method", `{"jsonrpc":"2.0","id":12,"method":"tools/destroy"}`, "12", -32601, `method not found: "tools/destroy"`},
		{"name a number", `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":5,"arguments":{}}}`, "13", -32602,
			"invalid params: params.name must be a string, not a number"},
		{"params an array", `{"jsonrpc":"2.0","id":14,"method":"tools/call","params":["mcp-tools__echo"]}`, "14", -32602,
			"params must be a JSON object, not an array"},
		{"cursor an object", `{"jsonrpc":"2.0","id":15,"method":"tools/list","params":{"cursor":{}}}`, "15", -32602,
			"params.cursor must be a string, not an object"},
		{"unknown tool", `{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"no-such__tool","arguments":{}}}`, "16", -32602,
			`unknown tool "no-such__tool"`},
	}
	for _, c := range cases {
		s.send(c.line)
		a := s.answer()
		if a.Error == nil || string(a.ID) != c.id || a.Error.Code != c.code || !strings.Contains(a.Error.Message, c.message) {
			t.Fatalf("%s: want id %s error %d %q, got id %s %+v (result %s)", c.name, c.id, c.code, c.message, a.ID, a.Error, a.Result)
		}
		for _, g := range goTerms {
			if strings.Contains(a.Error.Message, g) {
				t.Errorf("%s: the message speaks Go (%q): %s", c.name, g, a.Error.Message)
			}
		}
		t.Logf("%s -> %d %s", c.name, a.Error.Code, a.Error.Message)
		echo(c.name)
	}

	// arguments that are not an object: a tool error the client's model
	// can read (MCP: input errors are tool execution errors), nothing
	// run; then still serving.
	s.send(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"mcp-tools__echo","arguments":[1,2]}}`)
	text, isErr, _ := toolText(t, s.answer())
	if !isErr || !strings.HasPrefix(text, "bad arguments: ") || !strings.Contains(text, "not a JSON object") {
		t.Fatalf("arguments an array: isError=%v %q", isErr, text)
	}
	echo("arguments an array")

	// Invalid notifications are never answered (JSON-RPC): the next
	// answer is the echo's.
	s.send(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":5}}`)
	echo("an invalid notification")

	// A request, then at once the end of the stream: it is answered and
	// audited before the process exits, and it exits 0.
	s.send(`{"jsonrpc":"2.0","id":"last","method":"tools/call","params":{"name":"mcp-tools__echo","arguments":{"x":99}}}`)
	if err := s.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	a := s.answer()
	text, isErr, reqID := toolText(t, a)
	if string(a.ID) != `"last"` || isErr || text != `{"x":99}` || reqID == "" {
		t.Fatalf("request before EOF: id %s isError=%v %q request_id %q", a.ID, isErr, text, reqID)
	}
	if l, ok := <-s.lines; ok {
		t.Fatalf("more output after the last answer: %s", l)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("mcp serve: %v\nstderr: %s", err, s.stderr)
	}
	recs := e.auditRecords(t, reqID)
	if len(recs) != 2 || recs[0]["decision"] != "allow" || recs[1]["event"] != "outcome" || recs[1]["exit_code"] != float64(0) {
		t.Fatalf("audit records of the call before EOF %s: %v", reqID, recs)
	}
	if strings.Contains(s.stderr.String(), "panic") {
		t.Errorf("stderr: %s", s.stderr)
	}
	e.cli(t, "audit", "verify")
}

// A batch is what the MCP version of the session says: from 2025-06-18 on
// it is refused (above); a 2025-03-26 session must accept it, and gets one
// array with an answer per request (notifications unanswered), invalid
// members answered in place.
func TestMCPServeBatchBefore20250618(t *testing.T) {
	e := curatedEnv(t)
	s := e.serveWire(t)
	s.initialize("2025-03-26")
	s.send(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp-tools__echo","arguments":{"x":1}}},` +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}},` +
		`{"jsonrpc":"1.0","id":2,"method":"ping"},` +
		`{"jsonrpc":"2.0","id":3,"method":"ping"}]`)
	l := s.next()
	var answers []wireAnswer
	if err := json.Unmarshal([]byte(l), &answers); err != nil {
		t.Fatalf("batch answer %q: %v", l, err)
	}
	byID := map[string]wireAnswer{}
	for _, a := range answers {
		byID[string(a.ID)] = a
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"1", "2", "3"}) || len(answers) != 3 {
		t.Fatalf("batch answers: %s", l)
	}
	if text, isErr, _ := toolText(t, byID["1"]); isErr || text != `{"x":1}` {
		t.Fatalf("batch echo: %q", text)
	}
	if a := byID["2"]; a.Error == nil || a.Error.Code != -32600 {
		t.Fatalf("batch jsonrpc 1.0 member: %s", l)
	}
	if a := byID["3"]; a.Error != nil || string(a.Result) != "{}" {
		t.Fatalf("batch ping: %s", l)
	}
	s.send(`[]`)
	if a := s.answer(); a.Error == nil || a.Error.Code != -32600 {
		t.Fatalf("empty batch: %+v", a)
	}
}

// `mcp serve --package PKG` stands in front of one package: the official
// TypeScript client sees its tools under their own names and calls one
// through the whole pipeline; an unknown package is refused before
// serving, exit 2, by serve and status alike.
func TestMCPServePackage(t *testing.T) {
	requireNode(t)
	e := curatedEnv(t)

	var st struct {
		Server string `json:"server"`
		Tools  []struct {
			Name, Package, Tool string
		} `json:"tools"`
	}
	if err := json.Unmarshal(e.cli(t, "mcp", "status", "--package", "mcp-tools", "--json"), &st); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range st.Tools {
		names = append(names, tl.Name)
		if tl.Package != "mcp-tools" || tl.Tool != tl.Name {
			t.Errorf("status tool %+v", tl)
		}
	}
	if !slices.Equal(names, []string{"echo", "lookup", "wipe"}) || !strings.Contains(st.Server, "--package mcp-tools") {
		t.Fatalf("mcp status --package mcp-tools: %+v", st)
	}
	if text := string(e.cli(t, "mcp", "status", "--package", "some-mcp-server")); !strings.Contains(text, "read_file") ||
		strings.Contains(text, "some-mcp-server__") || strings.Contains(text, "echo") {
		t.Fatalf("mcp status --package some-mcp-server:\n%s", text)
	}

	out := e.runTSClientArgs(t, []string{"mcp", "serve", "--package", "mcp-tools"}, []map[string]any{
		{"name": "echo", "arguments": map[string]any{"x": 5}},
		{"name": "wipe", "arguments": map[string]any{}},
		{"name": "mcp-tools__echo", "arguments": map[string]any{"x": 5}},
	})
	// A toolpack has no resources or prompts to pass through: not advertised (specs/mcp.md).
	if out.Capabilities["tools"] == nil || out.Capabilities["resources"] != nil || out.Capabilities["prompts"] != nil {
		t.Errorf("capabilities under --package: %v", out.Capabilities)
	}
	names = nil
	for _, tl := range out.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Equal(names, []string{"echo", "lookup", "wipe"}) {
		t.Fatalf("tools of --package mcp-tools: %v", names)
	}
	if len(out.Results) != 3 {
		t.Fatalf("results: %+v", out.Results)
	}
	ok := out.Results[0]
	if ok.ProtocolError != "" || ok.IsError || ok.Text != `{"x":5}` {
		t.Fatalf("echo: %+v", ok)
	}
	id, _ := ok.Meta["agentnode/request_id"].(string)
	recs := e.auditRecords(t, id)
	if len(recs) != 2 || recs[0]["package"] != "mcp-tools" || recs[0]["tool"] != "echo" || recs[1]["exit_code"] != float64(0) {
		t.Fatalf("audit of %s: %v", id, recs)
	}
	if r := out.Results[1]; !r.IsError || !strings.HasPrefix(r.Text, "deny policy_prompt: ") {
		t.Fatalf("wipe: %+v", r)
	}
	// The prefixed name is not served in this mode.
	if r := out.Results[2]; r.ProtocolError == "" && !r.IsError {
		t.Fatalf("mcp-tools__echo under --package: %+v", r)
	}

	for _, args := range [][]string{
		{"mcp", "serve", "--package", "no-such-package"},
		{"mcp", "status", "--package", "no-such-package"},
		{"mcp", "serve", "--package", "Not A Package!"},
	} {
		cmd := e.command(args...)
		cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")
		b, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(b), "package is not installed") ||
			strings.Contains(string(b), `"jsonrpc"`) {
			t.Fatalf("%v: exit %d (%v)\n%s", args, code, err, b)
		}
	}
}

// runTSClientArgs is runTSClient with the server's arguments.
func (e *mcpEnv) runTSClientArgs(t testing.TB, args []string, calls []map[string]any) *tsOutput {
	t.Helper()
	node, script := requireNode(t)
	plan, _ := json.Marshal(map[string]any{
		"command": filepath.Join(binDir, "agentnode"),
		"args":    args,
		"cwd":     e.dir,
		"calls":   calls,
	})
	cmd := exec.Command(node, script, string(plan))
	cmd.Env, cmd.Dir = e.env, e.dir
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\nstdout: %s\nstderr: %s", err, b, stderr.String())
	}
	var res tsOutput
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("client output %q: %v", b, err)
	}
	return &res
}
