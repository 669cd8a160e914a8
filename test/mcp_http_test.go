package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentnode/agentnode/cmd/agentnode/mcpserve"
)

// `agentnode mcp serve --http`: the real binary serving Streamable HTTP,
// driven by the official TypeScript and Go SDK clients and attacked with
// raw HTTP requests.

// httpToolsYAML is mcpTools plus nap, a tool that takes a few seconds (to
// be running when the server is told to stop).
const httpToolsYAML = mcpTools + `    - name: nap
      description: Sleeps, then answers
      entrypoint: bin/nap
      action_type: read
      input_schema: {type: object}
`

// httpEnv sets agentnode up with the curated package mcp-tools (tools of
// httpToolsYAML, on the host, confined).
func httpEnv(t testing.TB) *mcpEnv {
	t.Helper()
	requireKeyring(t)
	e := newMCPEnv(t)
	e.cli(t, "setup")
	keyID := "mcp-http-" + strconv.FormatInt(time.Now().UnixNano(), 36) // unique in the shared keychain
	e.cli(t, "trust", "keygen", "--id", keyID)
	pkg := filepath.Join(e.dir, "pkg")
	writeMCPPackage(t, pkg, "mcp-tools", httpToolsYAML)
	nap := "#!/bin/sh\nread -r request\nsleep 3\necho '{\"ok\":true,\"result\":{\"slept\":true}}'\n"
	if err := os.WriteFile(filepath.Join(pkg, "bin", "nap"), []byte(nap), 0o755); err != nil {
		t.Fatal(err)
	}
	att := filepath.Join(e.dir, "att.json")
	if err := os.WriteFile(att, e.cli(t, "trust", "attest", pkg, "--level", "curated", "--key", keyID), 0o644); err != nil {
		t.Fatal(err)
	}
	e.cli(t, "install", pkg, "--attestation", att)
	e.cli(t, "config", "set", "guard.rate_limits.mcp-tools", `{"per_minute":10000,"per_hour":100000,"burst":1000}`)
	return e
}

// httpServer is a running `agentnode mcp serve --http`.
type httpServer struct {
	cmd    *exec.Cmd
	url    string // http://127.0.0.1:PORT/mcp
	stderr *lockedBuffer
	exited chan struct{}
}

// serveHTTP starts `agentnode mcp serve --http 127.0.0.1:0 args...` and
// waits for the address it prints.
func (e *mcpEnv) serveHTTP(t testing.TB, args ...string) *httpServer {
	t.Helper()
	cmd := e.command(append([]string{"mcp", "serve", "--http", "127.0.0.1:0"}, args...)...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &httpServer{cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(s.stderr, line)
			if _, rest, ok := strings.Cut(line, "serving Streamable HTTP at "); ok {
				u, _, _ := strings.Cut(rest, " ")
				urls <- u
			}
		}
		_, _ = io.Copy(io.Discard, pipe)
		_ = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-s.exited
	})
	select {
	case s.url = <-urls:
	case <-s.exited:
		t.Fatalf("mcp serve --http exited: %v\nstderr: %s", cmd.ProcessState, s.stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("mcp serve --http printed no address\nstderr: %s", s.stderr)
	}
	if !strings.HasPrefix(s.url, "http://127.0.0.1:") || !strings.HasSuffix(s.url, "/mcp") {
		t.Fatalf("address %q", s.url)
	}
	return s
}

// wait waits for the server to exit and returns its exit code.
func (s *httpServer) wait(t testing.TB) int {
	t.Helper()
	select {
	case <-s.exited:
	case <-time.After(5 * time.Minute):
		t.Fatalf("mcp serve --http still running\nstderr: %s", s.stderr)
	}
	return s.cmd.ProcessState.ExitCode()
}

// bearer adds an Authorization header to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connectHTTP connects the Go SDK client over Streamable HTTP with token.
func connectHTTP(t testing.TB, u, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "agentnode-e2e-go-http", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: u, HTTPClient: &http.Client{Transport: bearer{token}},
	}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", u, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// token returns `agentnode mcp token` and checks the file is 0600.
func (e *mcpEnv) token(t testing.TB) string {
	t.Helper()
	tok := strings.TrimSpace(string(e.cli(t, "mcp", "token")))
	fi, err := os.Stat(filepath.Join(e.home(), "mcp-http.token"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want 0600", fi.Mode())
	}
	if len(tok) < 32 {
		t.Fatalf("token %q", tok)
	}
	return tok
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",` +
	`"capabilities":{},"clientInfo":{"name":"attacker","version":"1"}}}`

// post sends a raw MCP POST; hdr is added to (or, with "", removes from)
// the usual MCP headers; host sets the Host header.
func post(t testing.TB, u, host string, hdr map[string]string, body io.Reader) (int, string) {
	t.Helper()
	code, body2, _ := postResp(t, u, host, hdr, body)
	return code, body2
}

// postResp is post that also returns the response headers.
func postResp(t testing.TB, u, host string, hdr map[string]string, body io.Reader) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", u, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(data), resp.Header
}

// The official TypeScript SDK client, over Streamable HTTP with the token,
// lists and calls the tools; the calls are audited like stdio ones.
func TestMCPServeHTTPTypeScriptClient(t *testing.T) {
	node, script := requireNode(t)
	script = filepath.Join(filepath.Dir(script), "http-client.mjs")
	e := httpEnv(t)
	srv := e.serveHTTP(t)
	tok := e.token(t)
	run := func(token string, calls []map[string]any) ([]byte, error) {
		plan, _ := json.Marshal(map[string]any{"url": srv.url, "token": token, "calls": calls})
		cmd := exec.Command(node, script, string(plan))
		cmd.Env, cmd.Dir = e.env, e.dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			err = fmt.Errorf("%w\nstderr: %s", err, stderr.Bytes())
		}
		return out, err
	}
	data, err := run(tok, []map[string]any{
		{"name": "mcp-tools__echo", "arguments": map[string]any{"x": 7}},
		{"name": "mcp-tools__wipe", "arguments": map[string]any{}},
	})
	if err != nil {
		t.Fatalf("node http-client.mjs: %v\nserver stderr: %s", err, srv.stderr)
	}
	var out struct {
		tsOutput
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("client output %q: %v", data, err)
	}
	if out.Server["name"] != "agentnode" || out.SessionID == "" {
		t.Errorf("server %v, session %q", out.Server, out.SessionID)
	}
	var names []string
	for _, tl := range out.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Equal(names, []string{"mcp-tools__echo", "mcp-tools__lookup", "mcp-tools__nap", "mcp-tools__wipe"}) {
		t.Fatalf("tools: %v", names)
	}
	if len(out.Results) != 2 {
		t.Fatalf("results: %+v", out.Results)
	}
	ok := out.Results[0]
	if ok.ProtocolError != "" || ok.IsError || ok.Text != `{"x":7}` || ok.StructuredContent["x"] != float64(7) {
		t.Fatalf("echo: %+v\nserver stderr: %s", ok, srv.stderr)
	}
	id, _ := ok.Meta["agentnode/request_id"].(string)
	if recs := e.auditRecords(t, id); len(recs) != 2 || recs[0]["decision"] != "allow" || recs[0]["tool"] != "echo" ||
		recs[1]["event"] != "outcome" || recs[1]["exit_code"] != float64(0) || recs[1]["placement"] != "host" {
		t.Fatalf("audit of %s: %v", id, recs)
	}
	deny := out.Results[1]
	if !deny.IsError || !strings.HasPrefix(deny.Text, "deny policy_prompt: ") {
		t.Fatalf("wipe: %+v", deny)
	}
	// The same client with a wrong token does not get a session.
	if data, err := run(tok+"x", nil); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong token: err %v, output %s", err, data)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := srv.wait(t); code != 0 {
		t.Fatalf("mcp serve --http exited %d after SIGTERM\nstderr: %s", code, srv.stderr)
	}
	e.cli(t, "audit", "verify")
}

// Attacks from the network side and from other users of the machine.
func TestMCPServeHTTPAttacks(t *testing.T) {
	e := httpEnv(t)
	srv := e.serveHTTP(t)
	tok := e.token(t)
	u, _ := url.Parse(srv.url)
	port := u.Port()
	auth := map[string]string{"Authorization": "Bearer " + tok}
	with := func(kv ...string) map[string]string {
		m := map[string]string{"Authorization": "Bearer " + tok}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}

	t.Run("token", func(t *testing.T) {
		for name, hdr := range map[string]map[string]string{
			"none":      {},
			"wrong":     {"Authorization": "Bearer " + strings.Repeat("A", len(tok))},
			"prefix":    {"Authorization": "Bearer " + tok[:len(tok)-1]},
			"longer":    {"Authorization": "Bearer " + tok + "A"},
			"empty":     {"Authorization": "Bearer "},
			"basic":     {"Authorization": "Basic " + tok},
			"as cookie": {"Cookie": "token=" + tok},
		} {
			code, body, h := postResp(t, srv.url, "", hdr, strings.NewReader(initializeBody))
			if code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer ") {
				t.Errorf("%s: %d %s (WWW-Authenticate %q), want 401 with a Bearer challenge", name, code, body, h.Get("WWW-Authenticate"))
			}
		}
		// The token works where the others did not (the 401s are not
		// from something else).
		if code, body := post(t, srv.url, "", auth, strings.NewReader(initializeBody)); code != http.StatusOK ||
			!strings.Contains(body, `"serverInfo"`) {
			t.Fatalf("with the token: %d %s", code, body)
		}
		// A GET event stream and a DELETE need it too.
		for _, m := range []string{http.MethodGet, http.MethodDelete} {
			req, _ := http.NewRequest(m, srv.url, nil)
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Mcp-Session-Id", "x")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s without token: %d", m, resp.StatusCode)
			}
		}
	})

	t.Run("host and origin", func(t *testing.T) {
		for _, c := range []struct {
			host, origin string
			want         int
		}{
			{"evil.example", "", http.StatusForbidden},
			{"evil.example:" + port, "", http.StatusForbidden},
			{"localhost.evil.example:" + port, "", http.StatusForbidden},
			{"127.0.0.1:1", "", http.StatusForbidden},
			{"10.0.0.1:" + port, "", http.StatusForbidden},
			{"", "http://evil.example", http.StatusForbidden},
			{"", "https://evil.example:" + port, http.StatusForbidden},
			{"", "null", http.StatusForbidden},
			{"", "file://", http.StatusForbidden},
			{"", "http://127.0.0.1.evil.example", http.StatusForbidden},
			// What a local client sends is accepted.
			{"localhost:" + port, "", http.StatusOK},
			{"", "http://localhost:3000", http.StatusOK},
			{"", "http://127.0.0.1:" + port, http.StatusOK},
		} {
			hdr := with()
			if c.origin != "" {
				hdr["Origin"] = c.origin
			}
			if code, body := post(t, srv.url, c.host, hdr, strings.NewReader(initializeBody)); code != c.want {
				t.Errorf("Host %q Origin %q: %d %s, want %d", c.host, c.origin, code, body, c.want)
			}
		}
		// Before the token is even looked at.
		if code, _ := post(t, srv.url, "evil.example", map[string]string{}, strings.NewReader(initializeBody)); code != http.StatusForbidden {
			t.Errorf("bad Host without token: %d, want 403", code)
		}
	})

	t.Run("size", func(t *testing.T) {
		cs := connectHTTP(t, srv.url, tok)
		big := func() io.Reader {
			return io.MultiReader(
				strings.NewReader(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"mcp-tools__echo","arguments":{"x":1,"pad":"`),
				bytes.NewReader(bytes.Repeat([]byte("a"), mcpserve.MaxFrame)),
				strings.NewReader(`"}}}`))
		}
		hdr := with("Mcp-Session-Id", cs.ID(), "Mcp-Protocol-Version", "2025-06-18")
		// With a Content-Length...
		data, _ := io.ReadAll(big())
		if code, body := post(t, srv.url, "", hdr, bytes.NewReader(data)); code != http.StatusRequestEntityTooLarge {
			t.Errorf("oversized body: %d %s, want 413", code, body)
		}
		// ...and chunked, without one.
		if code, body := post(t, srv.url, "", hdr, big()); code != http.StatusRequestEntityTooLarge {
			t.Errorf("oversized chunked body: %d %s, want 413", code, body)
		}
		// The session and the server keep serving.
		r := callTool(t, cs, "mcp-tools__echo", map[string]any{"x": 3})
		if r.IsError || resultText(r) != `{"x":3}` {
			t.Fatalf("echo after the oversized bodies: %v %q\nstderr: %s", r.IsError, resultText(r), srv.stderr)
		}
		id, _ := r.Meta["agentnode/request_id"].(string)
		if recs := e.auditRecords(t, id); len(recs) != 2 || recs[1]["exit_code"] != float64(0) {
			t.Fatalf("audit of %s: %v", id, recs)
		}
	})

	t.Run("remote address", func(t *testing.T) {
		for _, addr := range []string{"0.0.0.0:0", "[::]:0", "192.0.2.1:0", "example.com:0"} {
			cmd := e.command("mcp", "serve", "--http", addr)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 ||
				!strings.Contains(stderr.String(), "not a loopback address") || !strings.Contains(stderr.String(), "--http-allow-remote") {
				t.Errorf("--http %s: %v\nstderr: %s", addr, err, stderr.String())
			}
		}
	})

	t.Run("token file", func(t *testing.T) {
		path := filepath.Join(e.home(), "mcp-http.token")
		refused := func(what, want string) {
			t.Helper()
			for _, args := range [][]string{{"mcp", "token"}, {"mcp", "serve", "--http", "127.0.0.1:0"}} {
				cmd := e.command(args...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), want) ||
					strings.Contains(string(out), tok) {
					t.Errorf("%s: agentnode %s: %v, stdout %q\nstderr: %s", what, strings.Join(args, " "), err, out, stderr.String())
				}
			}
		}
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		refused("mode 0644", "mode 0644, want 0600")
		if err := os.Chmod(path, 0o600); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			refused("owned by nobody", "owned by another user")
			if err := os.Chown(path, 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		// A symlink to a file of the right mode is not followed.
		other := filepath.Join(e.dir, "other.token")
		if err := os.WriteFile(other, []byte(strings.Repeat("B", 43)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path, path+".saved"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(other, path); err != nil {
			t.Fatal(err)
		}
		refused("symlink", "a symlink")
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".saved", path); err != nil {
			t.Fatal(err)
		}
		if got := e.token(t); got != tok {
			t.Fatalf("token changed: %q, was %q", got, tok)
		}
		// Deleted: a new one is made, and the running server keeps the
		// one it started with.
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if got := e.token(t); got == tok {
			t.Fatal("a new token equals the old one")
		}
		if code, _ := post(t, srv.url, "", auth, strings.NewReader(initializeBody)); code != http.StatusOK {
			t.Errorf("the running server's token after a new one was made: %d", code)
		}
	})
	if strings.Contains(srv.stderr.String(), "panic") {
		t.Errorf("stderr: %s", srv.stderr)
	}
}

// Two HTTP sessions are two MCP sessions of one server: their calls share
// the plugin processes (started once, for the first call of either).
func TestMCPServeHTTPSessionsShareServer(t *testing.T) {
	e := httpEnv(t)
	srv := e.serveHTTP(t)
	tok := e.token(t)
	a, b := connectHTTP(t, srv.url, tok), connectHTTP(t, srv.url, tok)
	if a.ID() == "" || a.ID() == b.ID() {
		t.Fatalf("session ids %q and %q", a.ID(), b.ID())
	}
	if r := callTool(t, a, "mcp-tools__echo", map[string]any{"x": 1}); r.IsError || resultText(r) != `{"x":1}` {
		t.Fatalf("session a: %q\nstderr: %s", resultText(r), srv.stderr)
	}
	plugins := childPlugins(t, srv.cmd.Process.Pid)
	if len(plugins) == 0 {
		t.Fatal("no plugin processes under mcp serve --http after a call")
	}
	if r := callTool(t, b, "mcp-tools__echo", map[string]any{"x": 2}); r.IsError || resultText(r) != `{"x":2}` {
		t.Fatalf("session b: %q\nstderr: %s", resultText(r), srv.stderr)
	}
	if again := childPlugins(t, srv.cmd.Process.Pid); !maps.Equal(plugins, again) {
		t.Errorf("plugin processes differ between sessions: %v, then %v", plugins, again)
	}
}

// A SIGTERM while a call runs: no new connections, the call finishes and
// its result reaches the client, its outcome is audited, serve exits 0.
func TestMCPServeHTTPShutdown(t *testing.T) {
	e := httpEnv(t)
	srv := e.serveHTTP(t)
	tok := e.token(t)
	cs := connectHTTP(t, srv.url, tok)
	type result struct {
		r   *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcp-tools__nap", Arguments: map[string]any{}})
		done <- result{r, err}
	}()
	// The decision record is written before the tool runs.
	auditLog := filepath.Join(e.home(), "audit", "audit.jsonl")
	deadline := time.Now().Add(60 * time.Second)
	for {
		data, _ := os.ReadFile(auditLog)
		if bytes.Contains(data, []byte(`"tool":"nap"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nap call was not decided\nstderr: %s", srv.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Stops accepting: new connections are refused, while the call runs
	// on (it is checked below that it was not cut short).
	addr := strings.TrimSuffix(strings.TrimPrefix(srv.url, "http://"), "/mcp")
	deadline = time.Now().Add(60 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections after SIGTERM")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Nor is a new call taken on the open session.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp-tools__echo", Arguments: map[string]any{"x": 1}}); err == nil {
		t.Errorf("a call after SIGTERM was served: %+v", r)
	}
	res := <-done
	if res.err != nil || res.r.IsError || resultText(res.r) != `{"slept":true}` {
		t.Fatalf("the call running at SIGTERM: %v %+v\nstderr: %s", res.err, res.r, srv.stderr)
	}
	if code := srv.wait(t); code != 0 {
		t.Fatalf("mcp serve --http exited %d\nstderr: %s", code, srv.stderr)
	}
	id, _ := res.r.Meta["agentnode/request_id"].(string)
	recs := e.auditRecords(t, id)
	if len(recs) != 2 || recs[0]["tool"] != "nap" || recs[1]["event"] != "outcome" || recs[1]["exit_code"] != float64(0) {
		t.Fatalf("audit of the call running at SIGTERM %s: %v", id, recs)
	}
	// The refused call was never decided.
	if data, _ := os.ReadFile(auditLog); bytes.Contains(data, []byte(`"tool":"echo"`)) {
		t.Errorf("a call after SIGTERM was audited:\n%s", data)
	}
	e.cli(t, "audit", "verify")
}

// BenchmarkMCPToolsCallHTTP is BenchmarkMCPToolsCall over Streamable HTTP
// (`mcp serve --http`, the Go SDK client with the token): the same call,
// plus the HTTP round trip, the Host/Origin/token checks and the SSE
// response.
func BenchmarkMCPToolsCallHTTP(b *testing.B) {
	e := sharedSandboxEnv(b)
	srv := e.serveHTTP(b)
	cs := connectHTTP(b, srv.url, e.token(b))
	callTool(b, cs, "mcp-bench__echo", map[string]any{"x": 1}) // start the plugins
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := callTool(b, cs, "mcp-bench__echo", map[string]any{"x": 1})
		if r.IsError || resultText(r) != `{"x":1}` {
			b.Fatalf("isError=%v %q\nstderr: %s", r.IsError, resultText(r), srv.stderr)
		}
	}
}
