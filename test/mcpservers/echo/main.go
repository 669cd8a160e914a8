// Command echo is the MCP server of the e2e tests: a static Go binary
// (CGO_ENABLED=0, so it runs in the busybox-static sandbox image) built on
// the official go-sdk, speaking MCP over stdio. The e2e build puts it at
// extra/mcpserver-echo; packages copy it to bin/server and start it as
// ["/pack/bin/server"].
//
// Tools:
//
//	echo     {"echo": ARGS, "calls": N}: the arguments it received and how
//	         many tools/call this process has served (this one included)
//	fail     a tool error "no such record"
//	probe    what the process sees: uid, whether it can open a TCP
//	         connection (1.1.1.1:443 and 127.0.0.1:1), write /pack, and the
//	         names of its environment variables
//	secret   exists on the server; packages do not declare it, so agentnode
//	         never exposes or calls it
package main

import (
	"context"
	"encoding/json"
	"log"
	"net"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var calls atomic.Int64

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "agentnode-e2e-echo", Version: "1.0.0"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	s.AddTool(&mcp.Tool{Name: "echo", Description: "Echo the arguments", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := calls.Add(1)
			return structured(map[string]any{"echo": req.Params.Arguments, "calls": n}), nil
		})
	s.AddTool(&mcp.Tool{Name: "fail", Description: "Always fails", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such record"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "probe", Description: "What the server process sees", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return structured(probe()), nil
		})
	s.AddTool(&mcp.Tool{Name: "secret", Description: "Undeclared: must never be reachable", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return structured(map[string]any{"secret": "LEAKED-UNDECLARED-TOOL"}), nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Printf("echo mcp server: %v", err)
	}
}

func structured(v map[string]any) *mcp.CallToolResult {
	b, _ := json.Marshal(v)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}
}

func probe() map[string]any {
	dial := func(addr string) string {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			if strings.Contains(err.Error(), "connection refused") {
				return "refused"
			}
			return "error"
		}
		_ = c.Close()
		return "connected"
	}
	packWritable := false
	if f, err := os.CreateTemp("/pack", "probe-"); err == nil {
		packWritable = true
		_ = f.Close()
		_ = os.Remove(f.Name())
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		env = append(env, k)
	}
	sort.Strings(env)
	return map[string]any{
		"uid":           os.Getuid(),
		"internet":      dial("1.1.1.1:443"),
		"loopback":      dial("127.0.0.1:1"),
		"pack_writable": packWritable,
		"env":           env,
	}
}
