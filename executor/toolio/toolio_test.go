package toolio

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
)

func TestEncodeRequest(t *testing.T) {
	got, err := EncodeRequest("search", json.RawMessage("{\n  \"q\": \"a b\",\n  \"n\": [1, 2]\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"tool":"search","input":{"q":"a b","n":[1,2]}}` + "\n"
	if string(got) != want {
		t.Fatalf("EncodeRequest = %q, want %q", got, want)
	}

	// Names are JSON-escaped, never spliced.
	got, err = EncodeRequest(`we"ird\tool`, json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tool  string
		Input map[string]any
	}
	if err := json.Unmarshal(got, &doc); err != nil || doc.Tool != `we"ird\tool` || doc.Input == nil {
		t.Fatalf("round trip of %q: %+v, %v", got, doc, err)
	}

	// Exactly plan.MaxInput bytes is allowed; one more is not.
	big := append([]byte(`{"k":"`), bytes.Repeat([]byte("x"), plan.MaxInput-len(`{"k":""}`))...)
	big = append(big, `"}`...)
	if len(big) != plan.MaxInput {
		t.Fatalf("test input is %d bytes", len(big))
	}
	if _, err := EncodeRequest("t", big); err != nil {
		t.Fatalf("input of exactly plan.MaxInput bytes refused: %v", err)
	}
	bigger := append(append([]byte{}, big...), ' ')
	if _, err := EncodeRequest("t", bigger); !errors.Is(err, plan.ErrInputTooLarge) {
		t.Fatalf("input of plan.MaxInput+1 bytes: err = %v, want plan.ErrInputTooLarge", err)
	}
}

func TestEncodeRequestRefuses(t *testing.T) {
	cases := []struct {
		name  string
		tool  string
		input string
		want  error
	}{
		{"nil input", "t", "", plan.ErrInputNotObject},
		{"whitespace", "t", "  \n", plan.ErrInputNotObject},
		{"array", "t", `[1]`, plan.ErrInputNotObject},
		{"string", "t", `"{}"`, plan.ErrInputNotObject},
		{"null", "t", `null`, plan.ErrInputNotObject},
		{"number", "t", `1`, plan.ErrInputNotObject},
		{"two objects", "t", `{}{}`, plan.ErrInputNotObject},
		{"trailing garbage", "t", `{} x`, plan.ErrInputNotObject},
		{"unterminated", "t", `{"a":1`, plan.ErrInputNotObject},
		{"invalid utf8", "t", "{\"a\":\"\xff\"}", plan.ErrInputNotObject},
		{"too large", "t", `{"a":"` + strings.Repeat("x", plan.MaxInput) + `"}`, plan.ErrInputTooLarge},
		{"empty tool", "", `{}`, ErrToolName},
		{"newline in tool", "a\nb", `{}`, ErrToolName},
		{"nul in tool", "a\x00", `{}`, ErrToolName},
		{"c1 control in tool", "a\u0085", `{}`, ErrToolName},
		{"invalid utf8 tool", "a\xff", `{}`, ErrToolName},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var in json.RawMessage
			if c.input != "" {
				in = json.RawMessage(c.input)
			}
			out, err := EncodeRequest(c.tool, in)
			if err == nil {
				t.Fatalf("accepted: %q", out)
			}
			if !errors.Is(err, c.want) {
				t.Errorf("err = %v, want %v", err, c.want)
			}
			if !errors.Is(err, reason.ErrInputDenied) || reason.CodeOf(err) != reason.InputDenied {
				t.Errorf("err %v does not carry input_denied", err)
			}
		})
	}
}

// decodeCase is shared with the schema test: schemaOnly marks inputs that the
// JSON Schema cannot judge (size, UTF-8, duplicates, trailing data), which
// only the Go decoder refuses.
type decodeCase struct {
	name      string
	in        string
	ok        bool // want accepted
	wantOK    bool
	result    string
	errMsg    string
	goOnly    bool
	wantError error
}

var decodeCases = []decodeCase{
	{name: "success object", in: `{"ok":true,"result":{"a":[1,2]}}`, ok: true, wantOK: true, result: `{"a":[1,2]}`},
	{name: "success null", in: `{"ok":true,"result":null}`, ok: true, wantOK: true, result: `null`},
	{name: "success string", in: `{"result":"x","ok":true}`, ok: true, wantOK: true, result: `"x"`},
	{name: "success false", in: `{"ok":true,"result":false}`, ok: true, wantOK: true, result: `false`},
	{name: "whitespace around", in: " \n\t{ \"ok\" : true , \"result\" : 1 }\r\n\n", ok: true, wantOK: true, result: `1`},
	{name: "failure", in: `{"ok":false,"error":"boom"}`, ok: true, errMsg: "boom"},
	{name: "failure empty message", in: `{"ok":false,"error":""}`, ok: true},
	{name: "escaped key", in: `{"\u006fk":false,"error":"e"}`, ok: true, errMsg: "e"},
	{name: "unicode", in: `{"ok":true,"result":"日本\u00e9"}`, ok: true, wantOK: true, result: `"日本\u00e9"`},

	{name: "empty", in: ``, wantError: ErrMalformedResponse},
	{name: "only whitespace", in: " \n", wantError: ErrMalformedResponse},
	{name: "array", in: `[{"ok":true,"result":1}]`, wantError: ErrMalformedResponse},
	{name: "string", in: `"ok"`, wantError: ErrMalformedResponse},
	{name: "null", in: `null`, wantError: ErrMalformedResponse},
	{name: "missing ok", in: `{"result":1}`, wantError: ErrMalformedResponse},
	{name: "empty object", in: `{}`, wantError: ErrMalformedResponse},
	{name: "ok string", in: `{"ok":"true","result":1}`, wantError: ErrMalformedResponse},
	{name: "ok null", in: `{"ok":null,"error":"x"}`, wantError: ErrMalformedResponse},
	{name: "ok number", in: `{"ok":1,"result":1}`, wantError: ErrMalformedResponse},
	{name: "success without result", in: `{"ok":true}`, wantError: ErrMalformedResponse},
	{name: "failure without error", in: `{"ok":false}`, wantError: ErrMalformedResponse},
	{name: "failure with result", in: `{"ok":false,"error":"x","result":1}`, wantError: ErrMalformedResponse},
	{name: "success with error", in: `{"ok":true,"result":1,"error":"x"}`, wantError: ErrMalformedResponse},
	{name: "error not string", in: `{"ok":false,"error":{"msg":"x"}}`, wantError: ErrMalformedResponse},
	{name: "error null", in: `{"ok":false,"error":null}`, wantError: ErrMalformedResponse},
	{name: "unknown field", in: `{"ok":true,"result":1,"extra":2}`, wantError: ErrMalformedResponse},
	{name: "wrong case", in: `{"OK":true,"result":1}`, wantError: ErrMalformedResponse},
	{name: "wrong case result", in: `{"ok":true,"Result":1}`, wantError: ErrMalformedResponse},
	{name: "trailing comma", in: `{"ok":true,"result":1,}`, wantError: ErrMalformedResponse},
	{name: "unterminated", in: `{"ok":true,"result":1`, wantError: ErrMalformedResponse},
	{name: "duplicate ok", in: `{"ok":true,"ok":false,"error":"x","result":1}`, wantError: ErrMalformedResponse, goOnly: true},
	{name: "duplicate ok same value", in: `{"ok":true,"ok":true,"result":1}`, wantError: ErrMalformedResponse, goOnly: true},
	{name: "duplicate result", in: `{"ok":true,"result":1,"result":2}`, wantError: ErrMalformedResponse, goOnly: true},
	{name: "duplicate error", in: `{"ok":false,"error":"a","error":"b"}`, wantError: ErrMalformedResponse, goOnly: true},
	{name: "duplicate by escape", in: `{"ok":true,"\u006fk":false,"error":"x"}`, wantError: ErrMalformedResponse, goOnly: true},
	{name: "trailing garbage", in: `{"ok":true,"result":1} x`, wantError: ErrMalformedResponse, goOnly: true},
	{name: "two objects", in: `{"ok":true,"result":1}{"ok":true,"result":2}`, wantError: ErrMalformedResponse, goOnly: true},
	{name: "two objects on lines", in: "{\"ok\":true,\"result\":1}\n{\"ok\":true,\"result\":2}\n", wantError: ErrMalformedResponse, goOnly: true},
	{name: "log line before", in: "starting\n{\"ok\":true,\"result\":1}", wantError: ErrMalformedResponse, goOnly: true},
	{name: "nul after", in: "{\"ok\":true,\"result\":1}\x00", wantError: ErrMalformedResponse, goOnly: true},
	{name: "bom", in: "\xef\xbb\xbf{\"ok\":true,\"result\":1}", wantError: ErrMalformedResponse, goOnly: true},
	{name: "invalid utf8", in: "{\"ok\":true,\"result\":\"\xff\"}", wantError: ErrMalformedResponse, goOnly: true},
}

func TestDecodeResponse(t *testing.T) {
	for _, c := range decodeCases {
		t.Run(c.name, func(t *testing.T) {
			r, err := DecodeResponse([]byte(c.in))
			if !c.ok {
				if err == nil {
					t.Fatalf("accepted %q as %+v", c.in, r)
				}
				if !errors.Is(err, c.wantError) {
					t.Fatalf("err = %v, want %v", err, c.wantError)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused %q: %v", c.in, err)
			}
			if r.OK != c.wantOK || r.Error != c.errMsg {
				t.Fatalf("got %+v", r)
			}
			if c.wantOK && string(r.Result) != c.result {
				t.Fatalf("result = %s, want %s", r.Result, c.result)
			}
			if !c.wantOK && r.Result != nil {
				t.Fatalf("failure carries result %s", r.Result)
			}
		})
	}
}

func TestDecodeResponseSize(t *testing.T) {
	doc := []byte(`{"ok":true,"result":"x"}`)
	exact := append(append([]byte{}, doc...), bytes.Repeat([]byte(" "), MaxOutput-len(doc))...)
	if _, err := DecodeResponse(exact); err != nil {
		t.Fatalf("response of exactly MaxOutput bytes refused: %v", err)
	}
	over := append(exact, '\n')
	if _, err := DecodeResponse(over); !errors.Is(err, ErrOutputTooLarge) {
		t.Fatalf("MaxOutput+1 bytes: err = %v, want ErrOutputTooLarge", err)
	}
	// A large but legal result survives intact.
	payload := strings.Repeat("y", MaxOutput-64)
	r, err := DecodeResponse([]byte(`{"ok":true,"result":"` + payload + `"}`))
	if err != nil || string(r.Result) != `"`+payload+`"` {
		t.Fatalf("large result: err %v", err)
	}
}

func TestDecodeResponseDeepNesting(t *testing.T) {
	// encoding/json refuses nesting beyond its depth limit; that must be a
	// clean error, not a crash.
	deep := `{"ok":true,"result":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`
	if _, err := DecodeResponse([]byte(deep)); !errors.Is(err, ErrMalformedResponse) {
		t.Fatalf("err = %v", err)
	}
}

func TestResponseMarshal(t *testing.T) {
	cases := []struct {
		r    Response
		want string
	}{
		{Response{OK: true, Result: json.RawMessage(`{"a":1}`)}, `{"ok":true,"result":{"a":1}}`},
		{Response{OK: true}, `{"ok":true,"result":null}`},
		{Response{OK: false}, `{"ok":false,"error":""}`},
		{Response{OK: false, Error: "x", Result: json.RawMessage(`1`)}, `{"ok":false,"error":"x"}`},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.r)
		if err != nil || string(b) != c.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", c.r, b, err, c.want)
			continue
		}
		if _, err := DecodeResponse(b); err != nil {
			t.Errorf("marshalled response %s does not decode: %v", b, err)
		}
	}
}

func TestCappedBuffer(t *testing.T) {
	c := &CappedBuffer{Max: 5}
	if n, err := c.Write([]byte("abc")); n != 3 || err != nil {
		t.Fatal(n, err)
	}
	if _, err := c.Write([]byte("defg")); !errors.Is(err, ErrOutputLimit) || !c.Exceeded || string(c.Bytes()) != "abcde" {
		t.Fatalf("stdout cap: err=%v exceeded=%v %q", err, c.Exceeded, c.Bytes())
	}
	d := &CappedBuffer{Max: 2, Drop: true}
	if n, err := d.Write([]byte("xyz")); n != 3 || err != nil || string(d.Bytes()) != "xy" {
		t.Fatalf("stderr cap: %d %v %q", n, err, d.Bytes())
	}
}
