package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/editdist"
	"github.com/agentnode/agentnode/specs"
)

// SchemaFile is the schema's path inside specs.Schemas.
const SchemaFile = "schema/config.schema.json"

const schemaURL = "https://github.com/agentnode/agentnode/specs/schema/config.schema.json"

type schemaState struct {
	doc      map[string]any // the schema document, for key lookups
	compiled *jsonschema.Schema
}

var loadSchema = sync.OnceValues(func() (*schemaState, error) {
	raw, err := fs.ReadFile(specs.Schemas, SchemaFile)
	if err != nil {
		return nil, fmt.Errorf("read embedded config schema: %w", err)
	}
	v, err := decodeStrict(raw)
	if err != nil {
		return nil, fmt.Errorf("parse embedded config schema: %w", err)
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("embedded config schema is not an object")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("load embedded config schema: %w", err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("compile embedded config schema: %w", err)
	}
	return &schemaState{doc: doc, compiled: sch}, nil
})

// problem is one thing wrong with a config document, at a dotted key.
type problem struct {
	key string
	msg string
}

func (p problem) String() string { return p.key + ": " + p.msg }

// check validates a generic config document against the schema and the rules
// the schema cannot express. It returns the problems sorted by key, or an
// error if the schema itself cannot be loaded.
func check(doc any) ([]problem, error) {
	st, err := loadSchema()
	if err != nil {
		return nil, err
	}
	if err := st.compiled.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, fmt.Errorf("validate config: %w", err)
		}
		var ps []problem
		collect(st, doc, ve, &ps)
		return sortProblems(ps), nil
	}
	return sortProblems(semanticProblems(doc)), nil
}

func sortProblems(ps []problem) []problem {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].key < ps[j].key })
	return slices.CompactFunc(ps, func(a, b problem) bool { return a == b })
}

// Lower bounds of the sandbox limits beyond the schema's: a memory ceiling
// below MinMemory kills any runtime before the tool starts, and a /tmp
// below MinTmpSize is no file system at all.
const (
	MinMemory  = 16 << 20
	MinTmpSize = 1 << 20
)

// semanticProblems checks what the schema cannot: integers are written
// without a fraction or exponent (JSON Schema counts 256.0 as an integer),
// sizes are at least their minimum in bytes, trust key ids are unique and
// each public key decodes to 32 bytes.
func semanticProblems(doc any) []problem {
	var ps []problem
	if st, err := loadSchema(); err == nil {
		integerProblems(st, st.doc, doc, nil, &ps)
	}
	for _, sz := range []struct {
		key  string
		min  int64
		name string
	}{{"memory", MinMemory, "16m"}, {"tmp_size", MinTmpSize, "1m"}} {
		v, _ := LookupPath(doc, []string{"sandbox", "limits", sz.key})
		s, ok := v.(string)
		if !ok {
			continue
		}
		if n, err := ParseSize(s); err == nil && n < sz.min {
			ps = append(ps, problem{"sandbox.limits." + sz.key, fmt.Sprintf("%q is %s, below the minimum %s (%s)", s, humanBytes(n), sz.name, humanBytes(sz.min))})
		}
	}
	// A rate limit entry is in one form: agentnode's keys or the
	// AgentNode SDK's, never both (which value would apply is not clear).
	rls, _ := LookupPath(doc, []string{"guard", "rate_limits"})
	rlm, _ := rls.(map[string]any)
	for pkg, e := range rlm {
		entry, _ := e.(map[string]any)
		_, own := entry["per_minute"]
		sdk := false
		for _, k := range []string{"calls_per_minute", "calls_per_hour", "burst_size"} {
			_, ok := entry[k]
			sdk = sdk || ok
		}
		if own && sdk {
			ps = append(ps, problem{"guard.rate_limits." + pkg, "mixes agentnode's keys (per_minute, per_hour, burst) with the AgentNode SDK's (calls_per_minute, calls_per_hour, burst_size): use one form"})
		}
	}
	keys, _ := LookupPath(doc, []string{"trust", "keys"})
	arr, _ := keys.([]any)
	seen := map[string]int{}
	for i, k := range arr {
		obj, _ := k.(map[string]any)
		id, _ := obj["id"].(string)
		if j, dup := seen[id]; dup {
			ps = append(ps, problem{fmt.Sprintf("trust.keys[%d].id", i), fmt.Sprintf("duplicate key id %q (also trust.keys[%d])", id, j)})
		}
		seen[id] = i
		pk, _ := obj["public_key"].(string)
		if _, err := decodePublicKey(pk); err != nil {
			ps = append(ps, problem{fmt.Sprintf("trust.keys[%d].public_key", i), err.Error()})
		}
	}
	return ps
}

// integerProblems reports the values at integer keys (schema node) of v
// that are written with a fraction or an exponent, like "pids": 256.0:
// JSON Schema accepts them, the config's integer fields cannot hold them.
func integerProblems(st *schemaState, node map[string]any, v any, path []string, ps *[]problem) {
	node = resolve(st, node)
	switch v := v.(type) {
	case json.Number:
		if t, _ := node["type"].(string); t == "integer" && strings.ContainsAny(string(v), ".eE") {
			msg := fmt.Sprintf("%s is not an integer: write integers without a fraction or exponent", v)
			if f, err := v.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
				msg += fmt.Sprintf(" (%d)", int64(f))
			}
			*ps = append(*ps, problem{dotted(path), msg})
		}
	case map[string]any:
		props, _ := node["properties"].(map[string]any)
		extra, _ := node["additionalProperties"].(map[string]any)
		for k, x := range v {
			child, _ := props[k].(map[string]any)
			if child == nil {
				child = extra
			}
			if child != nil {
				integerProblems(st, child, x, append(path[:len(path):len(path)], k), ps)
			}
		}
	case []any:
		if items, _ := node["items"].(map[string]any); items != nil {
			for i, x := range v {
				integerProblems(st, items, x, append(path[:len(path):len(path)], "["+strconv.Itoa(i)+"]"), ps)
			}
		}
	}
}

// humanBytes renders n bytes in the largest binary unit that divides it.
func humanBytes(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

var printer = message.NewPrinter(language.English)

// collect turns the leaves of a validation error tree into problems at
// dotted keys.
func collect(st *schemaState, doc any, ve *jsonschema.ValidationError, ps *[]problem) {
	path := instancePath(doc, ve.InstanceLocation)
	switch k := ve.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		for _, name := range k.Properties {
			key := dotted(append(path, name))
			msg := "unknown key"
			if len(path) == 3 && path[0] == "guard" && path[1] == "tool_overrides" {
				// The object form of a tool override names action types.
				*ps = append(*ps, problem{key, "not an action type; allowed: " + strings.Join(Actions, ", ")})
				continue
			}
			if s := Suggest(key); len(s) > 0 {
				msg += " (did you mean " + strings.Join(s, " or ") + "?)"
			}
			*ps = append(*ps, problem{key, msg})
		}
		return
	case *kind.Required:
		for _, name := range k.Missing {
			*ps = append(*ps, problem{dotted(append(path, name)), "required key is missing"})
		}
		return
	case *kind.PropertyNames:
		// jsonschema v6.0.3 sets this error's InstanceLocation to a slice it
		// goes on reusing, so derive the object's path from the schema
		// location where the schema allows.
		if p, ok := pathFromSchemaLocation(ve.SchemaURL); ok {
			path = p
		}
		msg := "invalid name"
		if pat := propertyNamesPattern(st, ve.SchemaURL); pat != "" {
			msg += ": must match " + pat
		}
		*ps = append(*ps, problem{dotted(append(path, k.Property)), msg})
		return
	}
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collect(st, doc, c, ps)
		}
		return
	}
	*ps = append(*ps, problem{dotted(path), describe(ve.ErrorKind)})
}

// describe words a leaf error; enums list the allowed values.
func describe(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Enum:
		want := make([]string, 0, len(k.Want))
		for _, w := range k.Want {
			want = append(want, fmt.Sprint(w))
		}
		return fmt.Sprintf("%s is not allowed; allowed values: %s", show(k.Got), strings.Join(want, ", "))
	case *kind.Type:
		return fmt.Sprintf("must be %s, not %s", strings.Join(k.Want, " or "), k.Got)
	case *kind.Pattern:
		return fmt.Sprintf("%q does not match %s", k.Got, k.Want)
	case *kind.Minimum:
		return fmt.Sprintf("%s is below the minimum %s", rat(k.Got), rat(k.Want))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("%s must be more than %s", rat(k.Got), rat(k.Want))
	case *kind.Maximum:
		return fmt.Sprintf("%s is above the maximum %s", rat(k.Got), rat(k.Want))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("%s must be less than %s", rat(k.Got), rat(k.Want))
	}
	return k.LocalizedString(printer)
}

// rat renders a number of a schema error as JSON would write it.
func rat(r *big.Rat) string {
	if r.IsInt() {
		return r.RatString()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// pathFromSchemaLocation maps a schema location made only of properties
// steps (#/properties/guard/properties/tool_overrides/propertyNames) to the
// instance path it validates (guard.tool_overrides).
func pathFromSchemaLocation(location string) ([]string, bool) {
	_, frag, ok := strings.Cut(location, "#")
	if !ok {
		return nil, false
	}
	toks := strings.Split(strings.TrimPrefix(frag, "/"), "/")
	if len(toks) == 0 || toks[len(toks)-1] != "propertyNames" {
		return nil, false
	}
	toks = toks[:len(toks)-1]
	var path []string
	for i := 0; i < len(toks); i += 2 {
		if toks[i] != "properties" || i+1 >= len(toks) {
			return nil, false
		}
		path = append(path, strings.ReplaceAll(strings.ReplaceAll(toks[i+1], "~1", "/"), "~0", "~"))
	}
	return path, true
}

// propertyNamesPattern finds the pattern of the propertyNames schema at
// location (an absolute schema URL ending in a JSON pointer fragment).
func propertyNamesPattern(st *schemaState, location string) string {
	_, frag, ok := strings.Cut(location, "#")
	if !ok {
		return ""
	}
	var node any = st.doc
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := node.(map[string]any)
		if !ok {
			return ""
		}
		node = m[tok]
	}
	m, _ := node.(map[string]any)
	p, _ := m["pattern"].(string)
	return p
}

// instancePath converts a validator instance location to path elements,
// writing array indexes as "[n]".
func instancePath(doc any, loc []string) []string {
	out := make([]string, 0, len(loc))
	node := doc
	for _, tok := range loc {
		switch n := node.(type) {
		case []any:
			out = append(out, "["+tok+"]")
			var i int
			if _, err := fmt.Sscan(tok, &i); err == nil && i >= 0 && i < len(n) {
				node = n[i]
			} else {
				node = nil
			}
		case map[string]any:
			out = append(out, tok)
			node = n[tok]
		default:
			out = append(out, tok)
			node = nil
		}
	}
	return out
}

// LookupPath walks object keys in a generic document.
func LookupPath(doc any, path []string) (any, bool) {
	node := doc
	for _, p := range path {
		m, ok := node.(map[string]any)
		if !ok {
			return nil, false
		}
		if node, ok = m[p]; !ok {
			return nil, false
		}
	}
	return node, true
}

// SchemaDocument is the config schema (SchemaFile) as a generic JSON
// document, for a front end that walks its keys; callers must not change
// it.
func SchemaDocument() (map[string]any, error) {
	st, err := loadSchema()
	if err != nil {
		return nil, reason.Wrap(reason.ConfigInvalid, err, "")
	}
	return st.doc, nil
}

// resolve is ResolveRef in the loaded schema.
func resolve(st *schemaState, node map[string]any) map[string]any { return ResolveRef(st.doc, node) }

// ResolveRef follows a local "$ref": "#/$defs/NAME" of node in schema
// (SchemaDocument) and returns the referenced node merged under the
// referring node's own keywords.
func ResolveRef(schema, node map[string]any) map[string]any {
	ref, ok := node["$ref"].(string)
	if !ok {
		return node
	}
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	if !ok {
		return node
	}
	defs, _ := schema["$defs"].(map[string]any)
	target, _ := defs[name].(map[string]any)
	merged := map[string]any{}
	for k, v := range ResolveRef(schema, target) {
		merged[k] = v
	}
	for k, v := range node {
		if k != "$ref" {
			merged[k] = v
		}
	}
	return merged
}

// Key is a key of the config schema whose value is not a fixed-shape
// object: a scalar, an array or a map (Keys).
type Key struct {
	// Name is the dotted key (sandbox.limits.memory).
	Name string
	// Default: the schema gives it a default. A key without one
	// (guard.max_permissions.network and the like) is optional: absent
	// means unset, and setup never writes it.
	Default bool
	// SDK is its x-agentnode-sdk annotation (SDKMapped, SDKNotEnforced)
	// when it is one of the AgentNode SDK's own keys, else "".
	SDK string
}

// SDK key statuses (the schema's x-agentnode-sdk annotation).
const (
	SDKMapped      = "mapped"
	SDKNotEnforced = "not_enforced"
)

// schemaKeys is the one walk of the schema's keys: every leaf, sorted,
// and the fixed-shape sections.
type schemaKeys struct {
	leaves   []Key
	sections []string
}

var walkKeys = sync.OnceValues(func() (*schemaKeys, error) {
	st, err := loadSchema()
	if err != nil {
		return nil, err
	}
	ks := &schemaKeys{}
	var walk func(prefix string, node map[string]any)
	walk = func(prefix string, node map[string]any) {
		r := resolve(st, node)
		props, ok := r["properties"].(map[string]any)
		if !ok {
			// The "default" annotation sits next to a $ref, on the
			// unresolved node.
			_, def := node["default"]
			sdk, _ := node["x-agentnode-sdk"].(string)
			ks.leaves = append(ks.leaves, Key{Name: prefix, Default: def, SDK: sdk})
			return
		}
		if prefix != "" {
			ks.sections = append(ks.sections, prefix)
		}
		for name, child := range props {
			key := name
			if prefix != "" {
				key = prefix + "." + name
			}
			walk(key, child.(map[string]any))
		}
	}
	walk("", st.doc)
	sort.Slice(ks.leaves, func(i, j int) bool { return ks.leaves[i].Name < ks.leaves[j].Name })
	sort.Strings(ks.sections)
	return ks, nil
})

// Keys lists the keys of the schema whose values are not fixed-shape
// objects (every scalar, array and map key), sorted by name, and the
// fixed-shape sections (sandbox.limits), sorted: one walk of the schema,
// for validation messages here and for the front end that lists and
// edits the file.
func Keys() (leaves []Key, sections []string, err error) {
	ks, err := walkKeys()
	if err != nil {
		return nil, nil, reason.Wrap(reason.ConfigInvalid, err, "")
	}
	return ks.leaves, ks.sections, nil
}

// Suggest returns up to three known keys close to key: same last
// element, or a small edit distance.
func Suggest(key string) []string {
	ks, err := walkKeys()
	if err != nil {
		return nil
	}
	known := make([]string, 0, len(ks.leaves)+len(ks.sections))
	for _, k := range ks.leaves {
		known = append(known, k.Name)
	}
	known = append(known, ks.sections...)
	return editdist.Closest(known, key)
}
