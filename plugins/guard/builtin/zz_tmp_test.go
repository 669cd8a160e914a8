package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/guard"
)

func TestZZPathological(t *testing.T) {
	arr := func(elem string) []byte {
		var b strings.Builder
		b.WriteString("[")
		for b.Len() < MaxPayloadBytes-len(elem)-2 {
			if b.Len() > 1 { b.WriteString(",") }
			b.WriteString(elem)
		}
		b.WriteString("]")
		return []byte(b.String())
	}
	schema := []byte(`{"type":"array","items":{"anyOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/b"}]},"$defs":{"a":{"type":"string","maxLength":5,"allOf":[{"$ref":"#/$defs/b"},{"$ref":"#/$defs/b"}]},"b":{"type":"string","pattern":"^x+$","anyOf":[{"$ref":"#/$defs/a"}]}}}`)
	for name, in := range map[string][]byte{
		"pct":      arr(`"%252525252e%2e%2f"`),
		"sk":       arr(`"sk-aaaaaaaaaaaaaaaaaaaaaaaaaaa"`),
		"short":    arr(`"a"`),
		"numbers":  arr(`1`),
		"bigsk":    []byte(`"` + strings.Repeat("sk-aaaaaaaaaaaaaaaaaaaaa ", MaxPayloadBytes/26) + `"`),
		"bigurl":   []byte(`"` + strings.Repeat("a://", MaxPayloadBytes/5) + `"`),
		"bigpct":   []byte(`"` + strings.Repeat("%25", MaxPayloadBytes/4) + `"`),
	} {
		for _, sc := range [][]byte{nil, schema} {
			st := time.Now()
			resp, err := NewInspector().inspect(context.Background(), &guard.InspectRequest{InputJSON: in, InputSchemaJSON: sc, Permissions: guard.Permissions{NetworkLevel: "none"}})
			t.Logf("%s schema=%v len=%d: %v %v %d reasons (%v)", name, sc != nil, len(in), time.Since(st), resp.Verdict, len(resp.Reasons), err)
		}
	}
}
