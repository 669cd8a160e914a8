package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/agentnode/agentnode/kernel/bounded"
)

// Bounds of a manifest's YAML, checked before goccy/go-yaml's parser (which
// recurses once per level) sees it (kernel/bounded). MaxDepth counts every
// collection, tag and anchor, so the input_schema of a tool
// (capabilities.tools[i].input_schema, at depth 4) has 60 levels left.
const (
	MaxDepth  = 64
	MaxTokens = 200_000
)

// yamlToJSON parses one YAML document and returns it as JSON. It refuses
// what a manifest has no use for and what would hide mistakes: bytes that
// are not UTF-8, NUL characters, nesting deeper than MaxDepth, duplicate
// keys, several documents, anchors, aliases and merge keys (<<), tags other
// than YAML's core ones (!!binary, !!set, custom tags), non-scalar keys,
// values JSON cannot represent (.nan, .inf).
func yamlToJSON(data []byte) ([]byte, []Problem) {
	if !utf8.Valid(data) {
		return nil, []Problem{{Msg: fmt.Sprintf("not valid UTF-8 (byte %d)", invalidUTF8At(data))}}
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return nil, []Problem{{Msg: fmt.Sprintf("contains a NUL byte (byte %d)", i)}}
	}
	tokens, err := bounded.YAML(data, bounded.YAMLLimits{MaxDepth: MaxDepth, MaxTokens: MaxTokens})
	if err != nil {
		return nil, []Problem{{Msg: "refused before parsing: " + err.Error()}}
	}
	// Duplicates are found by walk below, which can name the field.
	file, err := parser.Parse(tokens, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		return nil, []Problem{{Msg: yamlErrorText(err)}}
	}
	var docs []*ast.DocumentNode
	for _, d := range file.Docs {
		if d != nil && d.Body != nil {
			docs = append(docs, d)
		}
	}
	switch {
	case len(docs) == 0:
		return nil, []Problem{{Msg: "empty manifest"}}
	case len(docs) > 1:
		return nil, []Problem{{Msg: fmt.Sprintf("%d YAML documents; a manifest is exactly one", len(docs))}}
	}
	var problems []Problem
	walk(docs[0].Body, "", &problems)
	if len(problems) > 0 {
		return nil, problems
	}
	var v any
	if err := yaml.NodeToValue(docs[0].Body, &v); err != nil {
		return nil, []Problem{{Msg: yamlErrorText(err)}}
	}
	if problems := checkStrings(v, ""); len(problems) > 0 {
		return nil, problems
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, []Problem{{Msg: fmt.Sprintf("a value cannot be represented in JSON: %v", err)}}
	}
	return out, nil
}

// yamlErrorText renders a go-yaml error as "line L, column C: message",
// without the source excerpt go-yaml would add.
func yamlErrorText(err error) string {
	var ye yaml.Error
	if errors.As(err, &ye) {
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			return fmt.Sprintf("invalid YAML at line %d, column %d: %s", tk.Position.Line, tk.Position.Column, ye.GetMessage())
		}
		return "invalid YAML: " + ye.GetMessage()
	}
	return "invalid YAML: " + err.Error()
}

func line(n ast.Node) int {
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 0
}

// walk checks the node tree, recording problems with the field they are at.
func walk(n ast.Node, p fieldPath, problems *[]Problem) {
	bad := func(p fieldPath, format string, args ...any) {
		*problems = append(*problems, Problem{Field: string(p), Msg: fmt.Sprintf(format, args...)})
	}
	switch n := n.(type) {
	case nil:
	case *ast.MappingNode:
		walkPairs(n.Values, p, problems)
	case *ast.MappingValueNode:
		walkPairs([]*ast.MappingValueNode{n}, p, problems)
	case *ast.SequenceNode:
		for i, v := range n.Values {
			walk(v, p.index(i), problems)
		}
	case *ast.SequenceEntryNode:
		walk(n.Value, p, problems)
	case *ast.TagNode:
		if !coreTags[n.Start.Value] {
			bad(p, "YAML tag %s is not supported in a manifest (line %d); only YAML's core tags (!!str, !!int, !!float, !!bool, !!null, !!map, !!seq) are", n.Start.Value, line(n))
		}
		walk(n.Value, p, problems)
	case *ast.AnchorNode, *ast.AliasNode:
		bad(p, "YAML anchors and aliases are not supported in a manifest (line %d)", line(n))
	case *ast.MergeKeyNode:
		bad(p, "YAML merge keys (<<) are not supported in a manifest (line %d)", line(n))
	}
}

func walkPairs(pairs []*ast.MappingValueNode, p fieldPath, problems *[]Problem) {
	seen := map[string]int{}
	for _, mv := range pairs {
		key, ok := keyString(mv.Key)
		if !ok {
			if _, merge := mv.Key.(*ast.MergeKeyNode); merge {
				walk(mv.Key, p, problems)
			} else {
				*problems = append(*problems, Problem{Field: string(p),
					Msg: fmt.Sprintf("keys must be scalars (line %d)", line(mv.Key))})
			}
			continue
		}
		kp := p.key(key)
		if first, dup := seen[key]; dup {
			*problems = append(*problems, Problem{Field: string(kp),
				Msg: fmt.Sprintf("duplicate key (line %d; first defined on line %d)", line(mv.Key), first)})
			continue
		}
		seen[key] = line(mv.Key)
		walk(mv.Value, kp, problems)
	}
}

// keyString returns the text of a scalar key.
func keyString(k ast.MapKeyNode) (string, bool) {
	switch k := k.(type) {
	case *ast.StringNode:
		return k.Value, true
	case *ast.TagNode:
		if s, ok := k.Value.(ast.ScalarNode); ok {
			return fmt.Sprint(s.GetValue()), true
		}
	case *ast.MappingKeyNode:
		if s, ok := k.Value.(ast.ScalarNode); ok {
			return fmt.Sprint(s.GetValue()), true
		}
	case *ast.MergeKeyNode:
		return "", false
	case ast.ScalarNode:
		return fmt.Sprint(k.GetValue()), true
	}
	return "", false
}

// coreTags are the tags of YAML's core schema, which only say what plain
// YAML would infer or force a string. !!binary (bytes, which JSON cannot
// carry as they are), !!timestamp, !!set, !!omap and custom tags are refused.
var coreTags = map[string]bool{
	"!!str": true, "!!int": true, "!!float": true, "!!bool": true, "!!null": true, "!!map": true, "!!seq": true,
}

// checkStrings refuses keys and string values that are not valid UTF-8 or
// contain NUL: bytes the file does not show (escapes such as "\0" or
// "\xff" in double quotes) and that json.Marshal would silently replace.
func checkStrings(v any, p fieldPath) []Problem {
	bad := func(p fieldPath, s string) []Problem {
		switch {
		case !utf8.ValidString(s):
			return []Problem{{Field: string(p), Msg: "not valid UTF-8 (after YAML escapes)"}}
		case strings.IndexByte(s, 0) >= 0:
			return []Problem{{Field: string(p), Msg: "contains a NUL character"}}
		}
		return nil
	}
	var out []Problem
	switch v := v.(type) {
	case string:
		out = append(out, bad(p, v)...)
	case []any:
		for i, x := range v {
			out = append(out, checkStrings(x, p.index(i))...)
		}
	case map[string]any:
		for k, x := range v {
			if ps := bad(p, k); len(ps) > 0 {
				out = append(out, Problem{Field: string(p), Msg: "a key " + ps[0].Msg})
				continue
			}
			out = append(out, checkStrings(x, p.key(k))...)
		}
	}
	return out
}

// invalidUTF8At is the offset of the first byte of data that is not valid
// UTF-8.
func invalidUTF8At(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(data)
}
