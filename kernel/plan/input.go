package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/reason"
)

// Bounds of a tool input (specs/toolio.md). The decision checks the input
// against them (CheckInput) before anything else reads it, so Plan.Input
// always satisfies them; the tool I/O protocol (executor/toolio) and the
// front ends that read an input check the same bounds.
const (
	// MaxInput bounds the tool input document.
	MaxInput = 1 << 20
	// MaxInputDepth bounds the nesting of the tool input (objects and
	// arrays; {"a":[1]} is 2 levels): the schema validation and the
	// inspectors walk it recursively.
	MaxInputDepth = 128
)

// Errors of the input check; each is wrapped together with
// reason.ErrInputDenied.
var (
	// ErrInputTooLarge: the input is larger than MaxInput bytes.
	ErrInputTooLarge = errors.New("tool input too large")
	// ErrInputTooDeep: the input nests deeper than MaxInputDepth.
	ErrInputTooDeep = errors.New("tool input nested too deeply")
	// ErrInputNotObject: the input is not one valid JSON object.
	ErrInputNotObject = errors.New("tool input is not a JSON object")
)

// CheckInput checks a tool input: one JSON object of at most MaxInput bytes
// in valid UTF-8, nested at most MaxInputDepth deep (checked before
// anything decodes it). The kernel runs it before anything else reads the
// input; executor/toolio runs it again on every request it encodes. Every
// error wraps reason.ErrInputDenied and one of ErrInputTooLarge,
// ErrInputTooDeep or ErrInputNotObject.
func CheckInput(input json.RawMessage) error {
	if len(input) > MaxInput {
		return reason.New(reason.InputDenied, "toolio: input is %d bytes, the limit is %d: %w",
			len(input), MaxInput, ErrInputTooLarge)
	}
	if !utf8.Valid(input) {
		return reason.New(reason.InputDenied, "toolio: input is not valid UTF-8: %w", ErrInputNotObject)
	}
	if err := bounded.JSONDepth(input, MaxInputDepth); err != nil {
		return reason.New(reason.InputDenied, "toolio: input %v: %w", err, ErrInputTooDeep)
	}
	if !json.Valid(input) {
		return reason.New(reason.InputDenied, "toolio: input is not valid JSON: %w", ErrInputNotObject)
	}
	if b := bytes.TrimLeft(input, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		return reason.New(reason.InputDenied, "toolio: input must be a JSON object: %w", ErrInputNotObject)
	}
	return nil
}
