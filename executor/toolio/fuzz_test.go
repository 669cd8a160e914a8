package toolio

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/reason"
)

// FuzzDecodeResponse checks that DecodeResponse never panics, that every
// refusal wraps a protocol sentinel and that every accepted document is valid
// JSON, satisfies the protocol's invariants, validates against the published
// schema, agrees with encoding/json and survives a re-encode.
func FuzzDecodeResponse(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c.in))
	}
	loadSchemas(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := DecodeResponse(in)
		if err != nil {
			if r != nil {
				t.Fatalf("non-nil response with error %v", err)
			}
			if !errors.Is(err, ErrMalformedResponse) && !errors.Is(err, ErrOutputTooLarge) {
				t.Fatalf("error %v wraps no protocol sentinel", err)
			}
			return
		}
		if len(in) > MaxOutput || !json.Valid(in) {
			t.Fatalf("accepted invalid or oversized input %q", in)
		}
		if r.OK {
			if r.Result == nil || r.Error != "" || !json.Valid(r.Result) {
				t.Fatalf("bad success %+v", r)
			}
		} else if r.Result != nil {
			t.Fatalf("failure with result %+v", r)
		}
		if !schemaAccepts(t, responseSchema, in) {
			t.Fatalf("decoder accepts %q, schema refuses", in)
		}
		// encoding/json reads the same document the same way.
		var std struct {
			OK     *bool
			Result json.RawMessage
			Error  *string
		}
		if err := json.Unmarshal(in, &std); err != nil || std.OK == nil || *std.OK != r.OK {
			t.Fatalf("encoding/json disagrees on %q: %+v, %v", in, std, err)
		}
		if !r.OK && (std.Error == nil || *std.Error != r.Error) {
			t.Fatalf("encoding/json reads error %v, decoder %q", std.Error, r.Error)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("marshal %+v: %v", r, err)
		}
		r2, err := DecodeResponse(b)
		if err != nil {
			t.Fatalf("re-encoded %q does not decode: %v", b, err)
		}
		if r2.OK != r.OK || r2.Error != r.Error || !jsonEqual(t, r2.Result, r.Result) {
			t.Fatalf("round trip changed %+v to %+v", r, r2)
		}
	})
}

// FuzzEncodeRequest checks that an accepted request is one line of JSON that
// carries exactly the tool name and input, and that every refusal is an
// input_denied error.
func FuzzEncodeRequest(f *testing.F) {
	f.Add("search", []byte(`{"q":"x"}`))
	f.Add("t", []byte("{\n\"a\" : [1, 2,\n3]}"))
	f.Add("t", []byte(`{"s":"line\nbreak \u2028"}`))
	f.Add("", []byte(`{}`))
	f.Add("a\nb", []byte(`{}`))
	f.Add("t", []byte(`[]`))
	f.Add("t", []byte(`{}{}`))
	f.Fuzz(func(t *testing.T, tool string, input []byte) {
		b, err := EncodeRequest(tool, input)
		if err != nil {
			if b != nil || !errors.Is(err, reason.ErrInputDenied) {
				t.Fatalf("refusal %v: output %q, input_denied %v", err, b, errors.Is(err, reason.ErrInputDenied))
			}
			return
		}
		if !bytes.HasSuffix(b, []byte("\n")) || bytes.Count(b, []byte("\n")) != 1 {
			t.Fatalf("request %q is not one line", b)
		}
		var doc struct {
			Tool  string          `json:"tool"`
			Input json.RawMessage `json:"input"`
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("request %q does not decode: %v", b, err)
		}
		if doc.Tool != tool || !jsonEqual(t, doc.Input, input) {
			t.Fatalf("request %q carries %q/%s, want %q/%s", b, doc.Tool, doc.Input, tool, input)
		}
		if strings.TrimSpace(string(doc.Input))[0] != '{' {
			t.Fatalf("input %s is not an object", doc.Input)
		}
		if !schemaAccepts(t, requestSchema, b) {
			t.Fatalf("schema refuses %q", b)
		}
	})
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return reflect.DeepEqual(decodeAny(t, a), decodeAny(t, b))
}

// decodeAny decodes with UseNumber so that numbers beyond float64 (valid JSON)
// compare by their text.
func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}
