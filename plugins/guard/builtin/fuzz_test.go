package main

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentnode/agentnode/sdk/guard"
)

// FuzzInspect feeds arbitrary input and schema bytes (and network levels)
// to the inspector: it must never panic or fail, and must always give a
// valid verdict that is explained, deterministic and fail-closed for input
// that is not JSON or too large. The committed seeds are in
// testdata/fuzz/FuzzInspect.
func FuzzInspect(f *testing.F) {
	for _, s := range []struct{ input, schema, net string }{
		{`{"path":"notes.txt"}`, `{"type":"object","properties":{"path":{"type":"string","maxLength":255}}}`, "none"},
		{`{"path":"../x"}`, ``, "none"},
		{`{"u":"https://example.com"}`, `{"properties":{"u":{"type":"string","format":"uri"}}}`, "none"},
		{`{"t":"a;b"}`, `{"properties":{"t":{"$ref":"#/$defs/t"}},"$defs":{"t":{"type":"string"}}}`, "unrestricted"},
		{`[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]`, `true`, "restricted"},
		{`{"a":1,"a":2}`, `false`, ""},
		{`{"path": `, `{"type":`, "none"},
	} {
		f.Add([]byte(s.input), []byte(s.schema), s.net)
	}
	insp := NewInspector()
	f.Fuzz(func(t *testing.T, input, schema []byte, net string) {
		req := &guard.InspectRequest{
			Tool:            "fuzz",
			Permissions:     guard.Permissions{NetworkLevel: net},
			InputJSON:       input,
			InputSchemaJSON: schema,
		}
		// inspect, not Inspect: a panic must fail the fuzz test, not be
		// turned into a deny.
		resp, err := insp.inspect(context.Background(), req)
		if err != nil {
			t.Fatalf("inspect: %v", err)
		}
		switch resp.Verdict {
		case guard.VerdictAllow:
			if len(resp.Reasons) != 0 {
				t.Fatalf("allow with reasons %q", resp.Reasons)
			}
		case guard.VerdictPrompt, guard.VerdictDeny:
			if len(resp.Reasons) == 0 || len(resp.Reasons) > MaxReasons {
				t.Fatalf("%s with %d reasons", resp.Verdict, len(resp.Reasons))
			}
		default:
			t.Fatalf("verdict %q", resp.Verdict)
		}
		if (!json.Valid(input) || len(input) > MaxPayloadBytes) && resp.Verdict != guard.VerdictDeny {
			t.Fatalf("input that is not JSON or too large got %s %q", resp.Verdict, resp.Reasons)
		}
		again, err := insp.inspect(context.Background(), req)
		if err != nil || !reflect.DeepEqual(again, resp) {
			t.Fatalf("not deterministic: %+v then %+v (%v)", resp, again, err)
		}
	})
}
