package toolio

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/plan"
)

// FuzzMessage decodes an inbound MCP message as `agentnode mcp serve` does
// (the go-sdk's jsonrpc.DecodeMessage, then the tools/call arguments
// through Arguments): it must never panic, and any arguments let through
// must be an object within the size and depth bounds.
func FuzzMessage(f *testing.F) {
	call := func(args string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"p__t","arguments":` + args + `}}`)
	}
	f.Add(call(`{"q":"x"}`))
	f.Add(call(`null`))
	f.Add(call(`[1]`))
	f.Add(call(`{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`))
	f.Add(call(`{"a":` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + strings.Repeat(`{"a":`, 900) + `1` + strings.Repeat(`}`, 901)))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > plan.MaxInput+64<<10 { // cmd/agentnode/mcpserve.MaxFrame

			return
		}
		msg, err := jsonrpc.DecodeMessage(data)
		if err != nil {
			return
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || req.Method != "tools/call" {
			return
		}
		var params struct {
			Arguments json.RawMessage `json:"arguments"`
		}
		if json.Unmarshal(req.Params, &params) != nil {
			return
		}
		in, err := Arguments(params.Arguments)
		if err != nil {
			return
		}
		if len(in) > plan.MaxInput || bounded.JSONDepth(in, plan.MaxInputDepth) != nil {
			t.Fatalf("arguments %d bytes let through beyond the bounds", len(in))
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(in, &obj) != nil || obj == nil {
			t.Fatalf("arguments %q are not an object", in)
		}
	})
}
