package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// container is one open object or array of the walk.
type container struct {
	obj     bool
	schemas []map[string]any // the (expanded) schemas that apply to it
	wantKey bool             // object: the next token is a key or '}'
	key     string           // object: the current key
	keyN    int              // object: 1-based ordinal of the current key
	keys    map[string]bool  // object: keys seen so far
	idx     int              // array: index of the current element
}

// walker checks every key and value of the input in one iterative pass
// over its tokens: no recursion, so deep input cannot exhaust the stack, and
// the walk stops at the first structural limit.
type walker struct {
	ctx         context.Context
	fs          *findings
	schema      *inputSchema // nil: no input schema
	lookup      *lookup
	networkNone bool
	// workspace is the run's granted workspace ("" none): an absolute
	// path inside it is not refused (inWorkspace).
	workspace string

	stack []*container
	keys  int
}

// walk reports whether the whole input was walked: false means a
// structural deny (not JSON, too deep, too many keys) stopped it.
func (w *walker) walk(input []byte) (bool, error) {
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	done := false // a top-level value was completed
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := w.ctx.Err(); err != nil {
				return false, err
			}
		}
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			w.fs.deny(ruleMalformed, "", "the input is not valid JSON")
			return false, nil
		}
		if done {
			w.fs.deny(ruleMalformed, "", "the input holds more than one JSON document")
			return false, nil
		}
		top := w.top()
		if top != nil && top.obj && top.wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				w.pop()
				done = w.valueDone()
				continue
			}
			key, ok := tok.(string)
			if !ok {
				w.fs.deny(ruleMalformed, "", "the input is not valid JSON")
				return false, nil
			}
			if !w.key(top, key) {
				return false, nil
			}
			continue
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(w.stack) >= MaxDepth {
					w.fs.deny(ruleDepth, w.path(), fmt.Sprintf("objects and arrays are nested deeper than %d", MaxDepth))
					return false, nil
				}
				c := &container{obj: t == '{', schemas: w.valueSchemas()}
				if c.obj {
					c.wantKey = true
					c.keys = make(map[string]bool)
				}
				w.stack = append(w.stack, c)
			default: // ']' ('}' is handled above)
				w.pop()
				done = w.valueDone()
			}
		case string:
			w.value(t)
			done = w.valueDone()
		default:
			done = w.valueDone()
		}
	}
	if !done || len(w.stack) != 0 || !json.Valid(input) {
		w.fs.deny(ruleMalformed, "", "the input is not valid JSON")
		return false, nil
	}
	return true, nil
}

func (w *walker) top() *container {
	if len(w.stack) == 0 {
		return nil
	}
	return w.stack[len(w.stack)-1]
}

func (w *walker) pop() {
	if len(w.stack) > 0 {
		w.stack = w.stack[:len(w.stack)-1]
	}
}

// valueDone advances the parent past a completed value and reports whether
// that was the top-level value.
func (w *walker) valueDone() bool {
	top := w.top()
	switch {
	case top == nil:
		return true
	case top.obj:
		top.wantKey = true
	default:
		top.idx++
	}
	return false
}

// key checks one object key; false stops the walk.
func (w *walker) key(c *container, key string) bool {
	w.keys++
	if w.keys > MaxKeys {
		w.fs.deny(ruleKeys, "$", fmt.Sprintf("the input has more than %d object keys", MaxKeys))
		return false
	}
	c.keyN++
	c.key = key
	c.wantKey = false
	parent := w.containerPath(len(w.stack) - 1)
	if c.keys[key] {
		w.fs.deny(ruleDuplicateKey, parent+w.schema.renderKey(c.schemas, key, c.keyN),
			"the object repeats a key, so the tool could read a value that was not the one inspected")
	}
	c.keys[key] = true
	// A finding about the key itself never shows the key.
	w.checkString(key, parent+".<key #"+strconv.Itoa(c.keyN)+">", "an object key", nil, true)
	return true
}

// value checks one string value.
func (w *walker) value(s string) {
	w.checkString(s, w.path(), "a string", w.valueSchemas(), false)
}

// checkString applies the string rules to s, found at path. schemas are the
// schemas of the value; for keys there are none: a key is never free text
// and never declared a URI, but a "$name" key ("$ref", "$gt") is not shell
// syntax.
func (w *walker) checkString(s, path, what string, schemas []map[string]any, isKey bool) {
	if len(s) > MaxStringChars && runeCount(s) > MaxStringChars {
		w.fs.deny(ruleString, path, fmt.Sprintf("%s is longer than %d characters", what, MaxStringChars))
	}
	uri := !isKey && w.schema.hasURIFormat(schemas)
	for _, v := range variants(s) {
		if kind := secretKind(v); kind != "" {
			w.fs.deny(ruleSecret, path, fmt.Sprintf("%s looks like a secret (%s); sending it to a tool could exfiltrate it", what, kind))
		}
		if hasTraversal(v) {
			w.fs.deny(ruleTraversal, path, fmt.Sprintf("%s refers to a parent directory", what))
		}
		if isAbsolutePath(v) && !inWorkspace(v, w.workspace) {
			w.fs.deny(ruleAbsolute, path, fmt.Sprintf("%s is an absolute or home-relative path", what))
		}
		if w.networkNone && !uri && hasURL(v) {
			w.fs.deny(ruleURL, path, fmt.Sprintf("%s holds a URL but the package declares network none", what))
		}
	}
	shell := isKey || !w.schema.isFreeText(schemas)
	if isKey && strings.HasPrefix(s, "$") && plainKey.MatchString(s[1:]) {
		shell = false // "$ref", "$gt": JSON Schema and query-style keys
	}
	if shell {
		if names := shellTokens(s); names != "" {
			w.fs.prompt(ruleShell, path, fmt.Sprintf("%s outside a free-text field contains shell syntax (%s)", what, names))
		}
	}
}

// valueSchemas returns the schemas of the value at the current position.
func (w *walker) valueSchemas() []map[string]any {
	top := w.top()
	switch {
	case top == nil:
		return w.lookup.rootSchemas()
	case top.obj:
		return w.lookup.property(top.schemas, top.key)
	default:
		return w.lookup.item(top.schemas, top.idx)
	}
}

// path is the JSON path of the value at the current position.
func (w *walker) path() string { return w.containerPath(len(w.stack)) }

// containerPath is the JSON path of the value held by the first n open
// containers (n = 0: the root).
func (w *walker) containerPath(n int) string {
	var b strings.Builder
	b.WriteString("$")
	for _, c := range w.stack[:n] {
		if c.obj {
			b.WriteString(w.schema.renderKey(c.schemas, c.key, c.keyN))
		} else {
			b.WriteString("[" + strconv.Itoa(c.idx) + "]")
		}
	}
	return b.String()
}

// plainKey matches keys that may be shown in a path as they are.
var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)

// renderKey renders key (the n-th key of its object) as a path element. A
// key is shown only when it is a plain identifier or a property the schema
// declares, and does not look like a secret; otherwise only its ordinal is
// shown, since keys are input too.
func (s *inputSchema) renderKey(schemas []map[string]any, key string, n int) string {
	if secretKind(key) == "" {
		if plainKey.MatchString(key) {
			return "." + key
		}
		if s.declares(schemas, key) && runeCount(key) <= 64 {
			return "[" + strconv.Quote(key) + "]"
		}
	}
	if n <= 0 {
		return ".<key>"
	}
	return ".<key #" + strconv.Itoa(n) + ">"
}
