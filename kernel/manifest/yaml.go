package manifest

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// yamlToJSON parses one YAML document and returns it as JSON. It refuses
// what a manifest has no use for and what would hide mistakes: duplicate
// keys, several documents, anchors, aliases and merge keys (<<), non-scalar
// keys, values JSON cannot represent (.nan, .inf).
func yamlToJSON(data []byte) ([]byte, []Problem) {
	// Duplicates are found by walk below, which can name the field.
	file, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
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
