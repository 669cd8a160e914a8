package bounded

import (
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// astDepth is the nesting of the tree goccy/go-yaml's parser builds from
// tokens, counted as yamlDepth counts it: collections, pairs outside a
// mapping, explicit keys, tags and anchors. ok is false when the parser
// refuses the tokens.
func astDepth(data []byte) (depth int, ok bool) {
	tokens, err := YAML(data, YAMLLimits{MaxDepth: 1 << 30, MaxTokens: 1 << 30})
	if err != nil {
		return 0, false
	}
	f, err := parser.Parse(tokens, 0)
	if err != nil {
		return 0, false
	}
	for _, d := range f.Docs {
		if d != nil {
			depth = max(depth, nodeDepth(d.Body, false))
		}
	}
	return depth, true
}

func nodeDepth(n ast.Node, inMapping bool) int {
	switch n := n.(type) {
	case nil:
		return 0
	case *ast.MappingNode:
		d := 0
		for _, v := range n.Values {
			d = max(d, nodeDepth(v, true))
		}
		return 1 + d
	case *ast.MappingValueNode:
		d := max(nodeDepth(n.Key, false), nodeDepth(n.Value, false))
		if inMapping {
			return d
		}
		return 1 + d
	case *ast.MappingKeyNode:
		return 1 + nodeDepth(n.Value, false)
	case *ast.SequenceNode:
		d := 0
		for _, v := range n.Values {
			d = max(d, nodeDepth(v, false))
		}
		return 1 + d
	case *ast.SequenceEntryNode:
		return nodeDepth(n.Value, false)
	case *ast.TagNode:
		return 1 + nodeDepth(n.Value, false)
	case *ast.AnchorNode:
		return 1 + nodeDepth(n.Value, false)
	}
	return 0
}
