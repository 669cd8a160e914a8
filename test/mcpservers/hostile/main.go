// Command hostile is an MCP server of the e2e tests that answers what a
// hostile server would: results and resources larger than agentnode
// passes on, and a resource it does not list. A static Go binary on the
// official go-sdk (built like test/mcpservers/echo, extra/mcpserver-hostile),
// speaking MCP over stdio.
//
// Tools:
//
//	image    {"bytes": N}: a text item and an image of N bytes (PNG header,
//	         then zeros): 64 bytes passes, 5 MiB is over agentnode's 4 MiB
//	         output limit
//	oops     a tool error with a text and an image item
//
// Resources: hostile://small.txt (text "small"), hostile://huge.bin (a 5 MiB
// blob); a template hostile://logs/{day}.txt; hidden://secret is listed
// nowhere but answered (LEAKED-UNLISTED-RESOURCE) to whoever asks.
// Prompts: greet {name}.
package main

import (
	"context"
	"encoding/json"
	"log"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var png = []byte("\x89PNG\r\n\x1a\n")

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "agentnode-e2e-hostile", Version: "1.0.0"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	s.AddTool(&mcp.Tool{Name: "image", Description: "An image of the given size", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Bytes int }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			data := make([]byte, max(args.Bytes, len(png)))
			copy(data, png)
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "here it is"},
				&mcp.ImageContent{Data: data, MIMEType: "image/png"},
			}, Meta: mcp.Meta{"hostile/size": len(data)}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "oops", Description: "A tool error with an image", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{
				&mcp.TextContent{Text: "it broke"},
				&mcp.ImageContent{Data: png, MIMEType: "image/png"},
			}}, nil
		})
	text := func(uri, body string) mcp.ResourceHandler {
		return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: body}}}, nil
		}
	}
	s.AddResource(&mcp.Resource{Name: "small", URI: "hostile://small.txt", MIMEType: "text/plain"}, text("hostile://small.txt", "small"))
	s.AddResource(&mcp.Resource{Name: "huge", URI: "hostile://huge.bin", MIMEType: "application/octet-stream"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/octet-stream", Blob: make([]byte, 5<<20)}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "logs", URITemplate: "hostile://logs/{day}.txt", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return text("", "log of "+strings.TrimSuffix(strings.TrimPrefix(req.Params.URI, "hostile://logs/"), ".txt"))(ctx, req)
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}}},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Hello, " + req.Params.Arguments["name"]}}}}, nil
		})
	// The unlisted resource: answered to anyone who asks for it.
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.ReadResourceParams); ok && method == "resources/read" && p.URI == "hidden://secret" {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: p.URI, Text: "LEAKED-UNLISTED-RESOURCE"}}}, nil
			}
			return next(ctx, method, req)
		}
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Printf("hostile mcp server: %v", err)
	}
}
