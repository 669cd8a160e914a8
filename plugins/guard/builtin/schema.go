package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/agentnode/agentnode/sdk/guard"
)

// inputSchema is a tool's input schema, kept as a document to look up
// which schema applies at a path (free text, format uri). Validating the
// input against it is the host's job (guard.InspectRequest.SchemaCheck,
// sdk/guard/schemacheck): this plugin links no JSON Schema validator, whose
// initialization alone would cost milliseconds of every start. A nil
// *inputSchema means "no schema"; every method works on it.
type inputSchema struct {
	root any
}

// parseSchema parses raw. An empty or null schema is no schema. problem,
// when not empty, says why the schema is refused (it never quotes the
// schema); whether it compiles is in the host's SchemaCheck.
func parseSchema(raw []byte) (s *inputSchema, problem string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, ""
	}
	if p := guard.SchemaTooBig(raw); p != "" {
		return nil, p
	}
	doc, err := decodeJSON(raw)
	if err != nil {
		return nil, "the input schema is not valid JSON"
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return nil, "the input schema is neither an object nor a boolean"
	}
	return &inputSchema{root: doc}, ""
}

// decodeJSON decodes one JSON document, numbers as json.Number (exact).
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON document")
	}
	return v, nil
}

// schemaCache keeps parsed schemas by the SHA-256 of their text: a
// long-lived plugin sees the same few schemas again and again.
type schemaCache struct {
	mu  sync.Mutex
	max int
	m   map[[sha256.Size]byte]cachedSchema
}

type cachedSchema struct {
	s       *inputSchema
	problem string
}

func newSchemaCache(maxEntries int) *schemaCache {
	return &schemaCache{max: maxEntries, m: make(map[[sha256.Size]byte]cachedSchema)}
}

// get returns the parsed schema for raw (see parseSchema).
func (c *schemaCache) get(raw []byte) (*inputSchema, string) {
	if c == nil {
		return parseSchema(raw)
	}
	sum := sha256.Sum256(raw)
	c.mu.Lock()
	e, ok := c.m[sum]
	c.mu.Unlock()
	if ok {
		return e.s, e.problem
	}
	s, problem := parseSchema(raw)
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[sum] = cachedSchema{s: s, problem: problem}
	c.mu.Unlock()
	return s, problem
}

// Bounds of the schema look-ups: how many schemas one position may expand
// to, and how many $ref hops are followed.
const (
	maxExpanded = 64
	maxRefHops  = 16
)

// lookup finds the schemas that apply at a position of the input. It
// memoizes, so that the elements of a long array or the same keys in many
// objects cost one look-up each. A lookup belongs to one inspection; it is
// not safe for concurrent use.
type lookup struct {
	s        *inputSchema
	root     []map[string]any
	rootDone bool
	memo     map[lookupKey][]map[string]any
}

// lookupKey identifies a look-up: the parent schemas (by the address of
// their first element: memoized slices are shared, never modified), and a
// key or an array index (-1: any index past the tuple part).
type lookupKey struct {
	parents *map[string]any
	n       int
	key     string
	idx     int
}

func newLookup(s *inputSchema) *lookup {
	return &lookup{s: s, memo: make(map[lookupKey][]map[string]any)}
}

// rootSchemas are the schemas that apply to the whole input.
func (l *lookup) rootSchemas() []map[string]any {
	if l.s == nil {
		return nil
	}
	if !l.rootDone {
		l.root, l.rootDone = l.s.expand([]any{l.s.root}), true
	}
	return l.root
}

// property returns the schemas of the value of key in an object whose
// schemas are parents.
func (l *lookup) property(parents []map[string]any, key string) []map[string]any {
	if l.s == nil || len(parents) == 0 {
		return nil
	}
	k := lookupKey{parents: &parents[0], n: len(parents), key: key, idx: -2}
	if v, ok := l.memo[k]; ok {
		return v
	}
	v := l.s.property(parents, key)
	l.memo[k] = v
	return v
}

// item returns the schemas of element idx of an array whose schemas are
// parents.
func (l *lookup) item(parents []map[string]any, idx int) []map[string]any {
	if l.s == nil || len(parents) == 0 {
		return nil
	}
	at, n := idx, tupleLen(parents)
	if idx >= n {
		at = -1 // every element past the tuple part has the same schemas
	}
	k := lookupKey{parents: &parents[0], n: len(parents), idx: at}
	if v, ok := l.memo[k]; ok {
		return v
	}
	v := l.s.item(parents, idx)
	l.memo[k] = v
	return v
}

// tupleLen is the length of the longest tuple part (prefixItems, or a
// draft 7 items array) among the schemas.
func tupleLen(schemas []map[string]any) int {
	n := 0
	for _, m := range schemas {
		if p, ok := m["prefixItems"].([]any); ok {
			n = max(n, len(p))
		}
		if p, ok := m["items"].([]any); ok {
			n = max(n, len(p))
		}
	}
	return n
}

// expand returns the object schemas among ss plus those they reach through
// local $ref, allOf, anyOf and oneOf. When there are more than maxExpanded
// it returns none: the position then counts as having no schema, which is
// the conservative answer (not free text, not a URI).
func (s *inputSchema) expand(ss []any) []map[string]any {
	if s == nil {
		return nil
	}
	type item struct {
		v    any
		hops int
	}
	queue := make([]item, 0, len(ss))
	for _, v := range ss {
		queue = append(queue, item{v: v})
	}
	var out []map[string]any
	for len(queue) > 0 {
		if len(out) == maxExpanded || len(queue) > 4*maxExpanded {
			return nil
		}
		it := queue[0]
		queue = queue[1:]
		m, ok := it.v.(map[string]any)
		if !ok {
			continue // true, false or not a schema: says nothing
		}
		out = append(out, m)
		if ref, ok := m["$ref"].(string); ok && it.hops < maxRefHops {
			if target, ok := s.resolveRef(ref); ok {
				queue = append(queue, item{v: target, hops: it.hops + 1})
			}
		}
		for _, k := range []string{"allOf", "anyOf", "oneOf"} {
			if list, ok := m[k].([]any); ok {
				for _, v := range list {
					queue = append(queue, item{v: v, hops: it.hops})
				}
			}
		}
	}
	return out
}

// resolveRef resolves a local reference "#" or "#/json/pointer" against the
// schema document. Anything else is not followed.
func (s *inputSchema) resolveRef(ref string) (any, bool) {
	if !strings.HasPrefix(ref, "#") {
		return nil, false
	}
	frag, err := url.PathUnescape(ref[1:])
	if err != nil {
		return nil, false
	}
	if frag == "" {
		return s.root, true
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, false // an anchor
	}
	cur := s.root
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// property returns the schemas of the value of key in an object whose
// schemas are parents: properties[key], else additionalProperties.
func (s *inputSchema) property(parents []map[string]any, key string) []map[string]any {
	if s == nil {
		return nil
	}
	var out []any
	for _, p := range parents {
		if props, ok := p["properties"].(map[string]any); ok {
			if v, ok := props[key]; ok {
				out = append(out, v)
				continue
			}
		}
		if v, ok := p["additionalProperties"]; ok {
			out = append(out, v)
		}
	}
	return s.expand(out)
}

// item returns the schemas of element idx of an array whose schemas are
// parents: prefixItems/items (2020-12) or items/additionalItems (draft 7).
func (s *inputSchema) item(parents []map[string]any, idx int) []map[string]any {
	if s == nil {
		return nil
	}
	var out []any
	for _, p := range parents {
		if prefix, ok := p["prefixItems"].([]any); ok && idx < len(prefix) {
			out = append(out, prefix[idx])
			continue
		}
		switch items := p["items"].(type) {
		case []any: // draft 7 tuple
			if idx < len(items) {
				out = append(out, items[idx])
			} else if v, ok := p["additionalItems"]; ok {
				out = append(out, v)
			}
		case nil:
		default:
			out = append(out, items)
		}
	}
	return s.expand(out)
}

// declares reports whether one of the object schemas declares key as a
// property.
func (s *inputSchema) declares(schemas []map[string]any, key string) bool {
	for _, m := range schemas {
		if props, ok := m["properties"].(map[string]any); ok {
			if _, ok := props[key]; ok {
				return true
			}
		}
	}
	return false
}

// freeTextMaxLength: a string whose schema has no maxLength or one at least
// this large is free text.
const freeTextMaxLength = 1000

// isFreeText reports whether a string with these schemas is free text: a
// schema declares it a string, and none limits it below freeTextMaxLength
// or to an enum or const. A value without a schema is not free text.
func (s *inputSchema) isFreeText(schemas []map[string]any) bool {
	if s == nil {
		return false
	}
	isString := false
	for _, m := range schemas {
		if typeIncludes(m["type"], "string") {
			isString = true
		}
		if _, ok := m["enum"]; ok {
			return false
		}
		if _, ok := m["const"]; ok {
			return false
		}
		if n, ok := number(m["maxLength"]); ok && n < freeTextMaxLength {
			return false
		}
	}
	return isString
}

// uriFormats are the formats that declare a value a URL (or a template of
// URLs, as an MCP completion names a resource template).
var uriFormats = []string{"uri", "uri-reference", "iri", "iri-reference", "uri-template"}

// hasURIFormat reports whether one of the schemas says format uri.
func (s *inputSchema) hasURIFormat(schemas []map[string]any) bool {
	for _, m := range schemas {
		if f, ok := m["format"].(string); ok && slices.Contains(uriFormats, f) {
			return true
		}
	}
	return false
}

func typeIncludes(t any, name string) bool {
	switch t := t.(type) {
	case string:
		return t == name
	case []any:
		for _, v := range t {
			if v == name {
				return true
			}
		}
	}
	return false
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}

// validate adds a prompt for every violation of the input schema the host
// found (req.SchemaCheck, ordered by location and capped); the paths are
// rendered here, against the input and the schema. A schema the host did
// not check is a prompt too: whether the input conforms is unknown.
func validate(check *guard.SchemaCheck, l *lookup, input []byte, fs *findings) {
	if check == nil {
		fs.prompt(ruleSchema, "$", "the host did not validate the input against the input schema")
		return
	}
	if len(check.Violations) == 0 {
		return
	}
	doc, err := decodeJSON(input)
	if err != nil {
		fs.deny(ruleMalformed, "", "the input is not valid JSON")
		return
	}
	for _, v := range check.Violations {
		fs.prompt(ruleSchema, l.instancePath(doc, v.Location), v.Detail)
	}
	fs.omitted += check.Omitted
}

// instancePath renders the instance location loc of doc as a JSON path. A
// location past doc (a missing required property) is rendered as a key.
func (l *lookup) instancePath(doc any, loc []string) string {
	var b strings.Builder
	b.WriteString("$")
	cur, schemas := doc, l.rootSchemas()
	for _, tok := range loc {
		switch c := cur.(type) {
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				b.WriteString("[?]")
				cur, schemas = nil, nil
				continue
			}
			b.WriteString("[" + tok + "]")
			cur, schemas = c[i], l.item(schemas, i)
		case map[string]any:
			b.WriteString(l.s.renderKey(schemas, tok, 0))
			cur, schemas = c[tok], l.property(schemas, tok)
		default:
			b.WriteString(".<key>")
			cur, schemas = nil, nil
		}
	}
	return b.String()
}
