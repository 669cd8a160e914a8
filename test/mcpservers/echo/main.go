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
//	fetch    {"url": U, "ca": PATH}: an HTTPS GET of U through HTTPS_PROXY
//	         (the sandbox's sealed-egress forwarder; no proxy set means a
//	         direct connection, which the sandbox has no route for),
//	         trusting only the PEM CA bundle at PATH (default
//	         /pack/ca.pem); returns {"status", "body", "proxy"} or a tool
//	         error saying why
//	files    {"read": PATH, "write": PATH}: the working directory, PATH
//	         read (relative to it) and a line written to the other PATH
//	         (each "" skipped), with the error of each as a string:
//	         {"cwd", "read", "read_error", "write_error"}
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
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
	s.AddTool(&mcp.Tool{Name: "fetch", Description: "HTTPS GET through HTTPS_PROXY", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			out, err := fetch(ctx, req.Params.Arguments)
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
			}
			return structured(out), nil
		})
	s.AddTool(&mcp.Tool{Name: "files", Description: "Read and write files by path", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return structured(files(req.Params.Arguments)), nil
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

// fetch GETs args.url over HTTPS, through the proxy of the environment,
// trusting only the CA bundle at args.ca.
func fetch(ctx context.Context, raw json.RawMessage) (map[string]any, error) {
	var args struct{ URL, CA string }
	if err := json.Unmarshal(raw, &args); err != nil || args.URL == "" {
		return nil, errors.New(`fetch wants {"url": "https://...", "ca": "/pack/ca.pem"}`)
	}
	if args.CA == "" {
		args.CA = "/pack/ca.pem"
	}
	pem, err := os.ReadFile(args.CA)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA bundle %s has no certificate", args.CA)
	}
	client := &http.Client{
		Timeout: 15 * time.Second,
		Transport: &http.Transport{
			Proxy:           http.ProxyFromEnvironment,
			TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", args.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: body: %w", args.URL, err)
	}
	return map[string]any{"status": resp.StatusCode, "body": string(body), "proxy": os.Getenv("HTTPS_PROXY")}, nil
}

// files reads and writes the paths args names, relative to the working
// directory (the workspace, when one was granted).
func files(raw json.RawMessage) map[string]any {
	var args struct{ Read, Write string }
	_ = json.Unmarshal(raw, &args)
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	cwd, err := os.Getwd()
	out := map[string]any{"cwd": cwd, "cwd_error": errText(err)}
	if args.Read != "" {
		b, err := os.ReadFile(args.Read)
		out["read"], out["read_error"] = string(b), errText(err)
	}
	if args.Write != "" {
		out["write_error"] = errText(os.WriteFile(args.Write, []byte("written by the MCP server\n"), 0o644))
	}
	return out
}
