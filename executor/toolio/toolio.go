// Package toolio implements the tool I/O protocol of specs/toolio.md: the
// one JSON object the host writes to a tool process's stdin and the one JSON
// object the tool writes to its stdout. The same protocol is spoken across
// the sandbox boundary and by the host executor (executor/hostexec).
//
// It sits with the executors because they, not the decision, speak it: the
// kernel only checks a tool input against the protocol's input bounds, and
// that check (plan.CheckInput, plan.MaxInput, plan.MaxInputDepth and their
// errors) stays in kernel/plan, the contract between decision and
// execution; EncodeRequest and Arguments run the same check.
//
// A request is one line:
//
//	{"tool":NAME,"input":{...}}\n
//
// A response is exactly one JSON object, optionally surrounded by JSON
// whitespace:
//
//	{"ok":true,"result":ANY}
//	{"ok":false,"error":STRING}
//
// Decoding is strict and fails closed: unknown or duplicate fields, a
// missing or mistyped "ok", a success without "result", a failure without
// "error", a failure that carries a "result" (or a success that carries an
// "error"), invalid UTF-8, anything after the object and documents larger
// than MaxOutput are all errors wrapping ErrMalformedResponse or
// ErrOutputTooLarge.
//
// The formats are also published as JSON Schemas
// (specs/schema/toolio-request.schema.json,
// specs/schema/toolio-response.schema.json) and documented in
// specs/toolio.md.
package toolio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/reason"
)

// Output bounds of the protocol (the input bounds are plan.MaxInput and
// plan.MaxInputDepth).
const (
	// MaxOutput bounds a tool's stdout, that is the response document.
	MaxOutput = 4 << 20
	// MaxStderr bounds how much of a tool's stderr is kept for the run log.
	MaxStderr = 64 << 10
)

// Errors of the protocol. Request errors are also reason.ErrInputDenied; an
// input refused wraps plan.ErrInputTooLarge, plan.ErrInputTooDeep or
// plan.ErrInputNotObject.
var (
	// ErrToolName: the tool name is empty, not UTF-8 or has control characters.
	ErrToolName = errors.New("invalid tool name")
	// ErrOutputTooLarge: the tool's stdout is larger than MaxOutput bytes.
	ErrOutputTooLarge = errors.New("tool output too large")
	// ErrMalformedResponse: stdout is not exactly one valid response object.
	ErrMalformedResponse = errors.New("malformed tool response")
)

// Response is a decoded tool response. OK reports success; then Result holds
// the raw JSON result (the bytes "null" for a null result, never nil).
// Otherwise Error holds the tool's message (possibly empty) and Result is nil.
type Response struct {
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// MarshalJSON encodes r as a valid response document: a success always
// carries "result" (null when Result is empty) and no "error"; a failure
// always carries "error" and no "result".
func (r Response) MarshalJSON() ([]byte, error) {
	if r.OK {
		res := r.Result
		if len(res) == 0 {
			res = json.RawMessage("null")
		}
		return json.Marshal(struct {
			OK     bool            `json:"ok"`
			Result json.RawMessage `json:"result"`
		}{true, res})
	}
	return json.Marshal(struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}{false, r.Error})
}

// EncodeRequest returns the request document for tool with input, compacted
// onto one line and terminated by a newline. input must be one JSON object of
// at most plan.MaxInput bytes (measured as given, before compaction) in
// valid UTF-8, nested at most plan.MaxInputDepth deep (plan.CheckInput).
// Every error wraps reason.ErrInputDenied and one of plan.ErrInputTooLarge,
// plan.ErrInputTooDeep, plan.ErrInputNotObject or ErrToolName.
func EncodeRequest(tool string, input json.RawMessage) ([]byte, error) {
	if err := checkToolName(tool); err != nil {
		return nil, reason.New(reason.InputDenied, "toolio: tool %q: %w", tool, err)
	}
	if err := plan.CheckInput(input); err != nil {
		return nil, err
	}
	name, err := json.Marshal(tool)
	if err != nil {
		return nil, reason.New(reason.InputDenied, "toolio: encode tool name: %w", err)
	}
	var buf bytes.Buffer
	buf.Grow(len(`{"tool":,"input":}`) + len(name) + len(input) + 1)
	buf.WriteString(`{"tool":`)
	buf.Write(name)
	buf.WriteString(`,"input":`)
	if err := json.Compact(&buf, input); err != nil {
		return nil, reason.New(reason.InputDenied, "toolio: compact input: %w", err)
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

// Arguments returns the tool input of an MCP tools/call: absent or null
// arguments are {}, anything else must pass plan.CheckInput (one object,
// within plan.MaxInput and plan.MaxInputDepth, checked before anything
// decodes it). Errors are plan.CheckInput's.
func Arguments(raw json.RawMessage) (json.RawMessage, error) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" {
		return json.RawMessage(`{}`), nil
	}
	if err := plan.CheckInput(b); err != nil {
		return nil, err
	}
	return json.RawMessage(b), nil
}

func checkToolName(tool string) error {
	if tool == "" {
		return fmt.Errorf("empty: %w", ErrToolName)
	}
	if !utf8.ValidString(tool) {
		return fmt.Errorf("not valid UTF-8: %w", ErrToolName)
	}
	for _, r := range tool {
		if unicode.IsControl(r) {
			return fmt.Errorf("control character %U: %w", r, ErrToolName)
		}
	}
	return nil
}

// DecodeResponse parses a tool's complete stdout as one response document.
// Errors wrap ErrOutputTooLarge or ErrMalformedResponse.
func DecodeResponse(stdout []byte) (*Response, error) {
	if len(stdout) > MaxOutput {
		return nil, fmt.Errorf("toolio: response is %d bytes, the limit is %d: %w",
			len(stdout), MaxOutput, ErrOutputTooLarge)
	}
	if !utf8.Valid(stdout) {
		return nil, malformed("not valid UTF-8")
	}
	if len(bytes.TrimLeft(stdout, " \t\r\n")) == 0 {
		return nil, malformed("empty output")
	}
	// json.Valid checks that stdout is exactly one JSON value surrounded by
	// whitespace; everything below may then rely on well-formed tokens.
	if !json.Valid(stdout) {
		return nil, malformed("not exactly one JSON value")
	}
	dec := json.NewDecoder(bytes.NewReader(stdout))
	tok, err := dec.Token()
	if err != nil {
		return nil, malformed("%v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, malformed("not a JSON object")
	}
	var (
		resp              Response
		haveOK, haveError bool
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed("%v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, malformed("object key is not a string")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, malformed("field %q: %v", key, err)
		}
		switch key {
		case "ok":
			if haveOK {
				return nil, malformed(`duplicate field "ok"`)
			}
			haveOK = true
			switch string(bytes.TrimSpace(raw)) {
			case "true":
				resp.OK = true
			case "false":
				resp.OK = false
			default:
				return nil, malformed(`field "ok" must be true or false`)
			}
		case "result":
			if resp.Result != nil {
				return nil, malformed(`duplicate field "result"`)
			}
			resp.Result = bytes.TrimSpace(raw)
		case "error":
			if haveError {
				return nil, malformed(`duplicate field "error"`)
			}
			haveError = true
			if b := bytes.TrimSpace(raw); len(b) == 0 || b[0] != '"' {
				return nil, malformed(`field "error" must be a string`)
			}
			if err := json.Unmarshal(raw, &resp.Error); err != nil {
				return nil, malformed(`field "error": %v`, err)
			}
		default:
			return nil, malformed("unknown field %q", key)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, malformed("%v", err)
	}
	switch {
	case !haveOK:
		return nil, malformed(`missing field "ok"`)
	case resp.OK && resp.Result == nil:
		return nil, malformed(`"ok":true without "result"`)
	case resp.OK && haveError:
		return nil, malformed(`"ok":true with "error"`)
	case !resp.OK && !haveError:
		return nil, malformed(`"ok":false without "error"`)
	case !resp.OK && resp.Result != nil:
		return nil, malformed(`"ok":false with "result"`)
	}
	return &resp, nil
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("toolio: %s: %w", fmt.Sprintf(format, args...), ErrMalformedResponse)
}

// ErrOutputLimit stops a backend's stdout stream at the protocol limit
// (CappedBuffer).
var ErrOutputLimit = errors.New("tool output limit reached")

// CappedBuffer keeps at most Max bytes. Past the limit it either fails the
// write with ErrOutputLimit (stdout: the backend must stop the tool) or,
// with Drop, drops silently (stderr); Exceeded says the limit was passed.
type CappedBuffer struct {
	buf      bytes.Buffer
	Max      int
	Drop     bool
	Exceeded bool
}

func (c *CappedBuffer) Write(p []byte) (int, error) {
	room := c.Max - c.buf.Len()
	if len(p) <= room {
		return c.buf.Write(p)
	}
	if room > 0 {
		c.buf.Write(p[:room])
	}
	c.Exceeded = true
	if c.Drop {
		return len(p), nil
	}
	return 0, ErrOutputLimit
}

// Bytes is what was kept.
func (c *CappedBuffer) Bytes() []byte { return c.buf.Bytes() }
