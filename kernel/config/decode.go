package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agentnode/agentnode/kernel/bounded"
)

// DecodeStrict parses data as one JSON value as config files are parsed:
// numbers as json.Number, duplicate object keys refused (decodeStrict).
func DecodeStrict(data []byte) (any, error) { return decodeStrict(data) }

// decodeStrict parses one JSON value into the generic form the schema
// validator takes (map[string]any, []any, json.Number, string, bool, nil).
// Unlike encoding/json it refuses duplicate object keys, naming the key, and
// trailing data, and (before decoding, which recurses once per level) a
// document nested deeper than MaxDepth. Errors carry a position or a dotted
// key, never file content.
func decodeStrict(data []byte) (any, error) {
	if err := bounded.JSONDepth(data, MaxDepth); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, nil)
	if err != nil {
		return nil, describeSyntax(data, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err == nil {
			err = errors.New("unexpected data after the top-level value")
		}
		return nil, describeSyntax(data, err)
	}
	return v, nil
}

// keyError is a structural error at a key path.
type keyError struct {
	path []string
	msg  string
}

func (e *keyError) Error() string { return dotted(e.path) + ": " + e.msg }

func decodeValue(dec *json.Decoder, path []string) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string")
				}
				kp := append(path[:len(path):len(path)], k)
				if _, dup := obj[k]; dup {
					return nil, &keyError{path: kp, msg: "duplicate key"}
				}
				v, err := decodeValue(dec, kp)
				if err != nil {
					return nil, err
				}
				obj[k] = v
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, err
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := decodeValue(dec, append(path[:len(path):len(path)], "["+strconv.Itoa(len(arr))+"]"))
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, err
			}
			return arr, nil
		}
		return nil, fmt.Errorf("unexpected %q", rune(t))
	default:
		return t, nil // string, json.Number, bool, nil
	}
}

// describeSyntax turns a decoding error into a message with a line and
// column where encoding/json gives an offset.
func describeSyntax(data []byte, err error) error {
	var ke *keyError
	if errors.As(err, &ke) {
		return err
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("not valid JSON: unexpected end of input")
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := lineCol(data, se.Offset)
		return fmt.Errorf("not valid JSON at line %d, column %d: %w", line, col, err)
	}
	return fmt.Errorf("not valid JSON: %w", err)
}

func lineCol(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	if col < 1 {
		col = 1
	}
	return line, col
}

// dotted renders a key path: object keys joined with dots, array indexes
// (path elements of the form "[n]") appended as is: trust.keys[0].id. The
// empty path is the top level.
func dotted(path []string) string {
	if len(path) == 0 {
		return "(top level)"
	}
	var b strings.Builder
	for i, p := range path {
		if i > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}
