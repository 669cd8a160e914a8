package mcpserve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestReadLineBound(t *testing.T) {
	const max = 100 << 10 // over the reader's 64 KiB buffer
	long := strings.Repeat("a", max)
	in := long + "\n" + long + "a\n" + "short\r\n" + strings.Repeat("b", 3*max) + "\n" + "last"
	br := bufio.NewReaderSize(strings.NewReader(in), 64<<10)
	type got struct {
		n       int
		tooLong bool
		err     error
	}
	var seen []got
	for {
		line, tooLong, err := readLine(br, max)
		seen = append(seen, got{len(line), tooLong, err})
		if err != nil {
			break
		}
	}
	want := []got{{max, false, nil}, {0, true, nil}, {5, false, nil}, {0, true, nil}, {4, false, io.EOF}}
	if len(seen) != len(want) {
		t.Fatalf("lines %+v, want %+v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("line %d: %+v, want %+v", i, seen[i], want[i])
		}
	}
}

// serveLines runs a go-sdk server with a tool "slow" (it returns after
// delay) over StdioTransport on the given input, to its end, and returns
// the answers by id.
func serveLines(t *testing.T, input io.Reader, delay time.Duration) map[string]map[string]any {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		})
	var out lockedBuf
	err := srv.Run(context.Background(), &StdioTransport{Reader: io.NopCloser(input), Writer: nopCloser{&out}})
	if err != nil && err != io.EOF {
		t.Fatalf("run: %v", err)
	}
	answers := map[string]map[string]any{}
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("output line %q: %v", l, err)
		}
		answers[string(must(json.Marshal(m["id"])))] = m
	}
	return answers
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

const initLine = `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n" +
	`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"

// The input ends right after a call: the call still runs to its end and is
// answered before Run returns (the go-sdk's IOTransport would cancel it).
func TestStdioAnswersBeforeEOF(t *testing.T) {
	in := initLine + `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{}}}` + "\n"
	answers := serveLines(t, strings.NewReader(in), 300*time.Millisecond)
	res, _ := answers["2"]["result"].(map[string]any)
	if res == nil || res["isError"] == true {
		t.Fatalf("the call before EOF: %v", answers)
	}
	if c, _ := res["content"].([]any); len(c) != 1 || c[0].(map[string]any)["text"] != "done" {
		t.Fatalf("the call before EOF: %v", res)
	}
}

// Bad lines and calls interleaved, many at once: every line is answered,
// once, each answer a whole JSON line (the layer's own answers and the
// go-sdk's are written under one lock).
func TestStdioInterleaved(t *testing.T) {
	var in strings.Builder
	in.WriteString(initLine)
	const n = 200
	for i := 0; i < n; i++ {
		in.WriteString(`{"jsonrpc":"2.0","id":` + strconv.Itoa(1000+i) + `,"method":"tools/call","params":{"name":"slow","arguments":{}}}` + "\n")
		in.WriteString(`{"jsonrpc":"1.0","id":` + strconv.Itoa(5000+i) + `,"method":"ping"}` + "\n")
		in.WriteString(`{"jsonrpc":"2.0","id":` + strconv.Itoa(9000+i) + `,"method":"tools/call","params":{"name":` + strconv.Itoa(i) + `}}` + "\n")
		in.WriteString("}{\n")
	}
	answers := serveLines(t, strings.NewReader(in.String()), time.Millisecond)
	for i := 0; i < n; i++ {
		if a := answers[strconv.Itoa(1000+i)]; a["result"] == nil {
			t.Fatalf("call %d: %v", i, a)
		}
		if a := answers[strconv.Itoa(5000+i)]; a["error"].(map[string]any)["code"] != float64(-32600) {
			t.Fatalf("jsonrpc 1.0 %d: %v", i, a)
		}
		e, _ := answers[strconv.Itoa(9000+i)]["error"].(map[string]any)
		if e["code"] != float64(-32602) || e["message"] != "invalid params: params.name must be a string, not a number" {
			t.Fatalf("name a number %d: %v", i, e)
		}
	}
	// "init", the 3n answers above, and null for the parse errors (the
	// map keeps one of them).
	if len(answers) != 3*n+2 {
		t.Fatalf("%d distinct answers", len(answers))
	}
}

func TestCheckParamsWording(t *testing.T) {
	for _, c := range []struct{ method, params, want string }{
		{"tools/call", `{"name":"a","arguments":{}}`, ""},
		{"tools/call", `{"name":true}`, "invalid params: params.name must be a string, not a boolean"},
		{"tools/call", `{"name":"a","_meta":[]}`, "invalid params: params._meta must be an object, not an array"},
		{"tools/list", `{"cursor":null}`, ""},
		{"initialize", `{"protocolVersion":"x","capabilities":"all"}`, "invalid params: params.capabilities must be an object, not a string"},
		{"tools/call", `"x"`, "invalid params: params must be a JSON object, not a string"},
		{"something/else", `{"any":1}`, ""},
	} {
		got := checkParams(c.method, json.RawMessage(c.params))
		if got != c.want {
			t.Errorf("%s %s: %q, want %q", c.method, c.params, got, c.want)
		}
	}
}

// benchTransport measures one tools/call round trip (a trivial tool, 4 KiB
// of arguments) through a go-sdk server on the transport newT returns.
func benchTransport(b *testing.B, newT func(io.ReadCloser, io.WriteCloser) mcp.Transport) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background(), newT(inR, outW)) }()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	roundTrip := func(line string) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			b.Fatal(err)
		}
		if !lines.Scan() {
			b.Fatalf("no answer: %v", lines.Err())
		}
	}
	roundTrip(strings.TrimSuffix(strings.SplitN(initLine, "\n", 2)[0], "\n"))
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		b.Fatal(err)
	}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"s":"` + strings.Repeat("x", 4096) + `"}}}`
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		roundTrip(call)
	}
	b.StopTimer()
	inW.Close()
	<-done
}

func BenchmarkStdioTransport(b *testing.B) {
	benchTransport(b, func(r io.ReadCloser, w io.WriteCloser) mcp.Transport {
		return &StdioTransport{Reader: r, Writer: w}
	})
}

// BenchmarkIOTransport is the go-sdk's own stdio transport, side by side.
func BenchmarkIOTransport(b *testing.B) {
	benchTransport(b, func(r io.ReadCloser, w io.WriteCloser) mcp.Transport {
		return &mcp.IOTransport{Reader: r, Writer: w, MaxLineLength: MaxFrame}
	})
}
