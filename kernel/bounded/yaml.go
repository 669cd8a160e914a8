package bounded

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/token"
)

// YAMLLimits bound a YAML document for YAML.
type YAMLLimits struct {
	// MaxDepth is the deepest nesting allowed: every block or flow
	// collection counts one level, and so does each tag, anchor and
	// explicit key (?) on the way, since the parser nests a node for each.
	MaxDepth int
	// MaxTokens bounds the tokens the lexer may produce (each costs a few
	// hundred bytes); it is checked on an upper bound computed from the
	// bytes before the lexer runs.
	MaxTokens int
}

// YAML returns the tokens of data (goccy/go-yaml's lexer, whose tokens its
// parser takes: parser.Parse) once it knows that parsing them is bounded:
//
//  1. Before the lexer runs, an upper bound of the number of tokens it can
//     produce is computed from the bytes (two per indicator character,
//     three per line); over MaxTokens the document is refused with
//     ErrTooLarge. This bounds the lexer's memory.
//  2. The nesting the parser will build is measured on the tokens with an
//     explicit stack (flow collections by their brackets, block
//     collections by the columns of their indicators, as YAML nests them);
//     over MaxDepth the document is refused with a *DepthError. This bounds
//     the parser's recursion. The measure errs only upwards: explicit keys
//     and pairs in flow sequences count a level each, every tag and anchor
//     of a top-level entry counts one level, and a block level ends only at
//     the first token of a later line at a column left of it (or at its own
//     column, for a sibling). FuzzYAML checks it against the depth of the
//     tree the parser builds.
//
// Aliases are not expanded by the parser (an alias is a node that names its
// anchor), so they add neither tokens nor depth; a decoder that expands
// them (yaml.NodeToValue) must refuse them itself, as kernel/manifest does.
func YAML(data []byte, lim YAMLLimits) (token.Tokens, error) {
	if n := yamlTokenBound(data); n > lim.MaxTokens {
		return nil, fmt.Errorf("more than %d YAML tokens (up to %d): %w", lim.MaxTokens, n, ErrTooLarge)
	}
	tokens := lexer.Tokenize(string(data))
	if d, line := yamlDepth(tokens, lim.MaxDepth); d > lim.MaxDepth {
		return nil, &DepthError{Max: lim.MaxDepth, Line: line}
	}
	return tokens, nil
}

// yamlTokenBound is an upper bound of len(lexer.Tokenize(data)). Every
// token the lexer makes is an indicator (one of the bytes counted here),
// a scalar, comment, tag or anchor name that starts right after one of them
// or at the start of a line, a word of a directive (%YAML 1.2), or the
// empty content of a block scalar (after its | or >): so at most two tokens
// per indicator byte (or space in a directive) plus a few per line.
func yamlTokenBound(data []byte) int {
	n := 3
	directive := len(data) > 0 && data[0] == '%' // a directive's words are tokens
	for i, c := range data {
		switch c {
		case '\n', '\r':
			n += 3
			directive = i+1 < len(data) && data[i+1] == '%'
		case '[', ']', '{', '}', ',', ':', '-', '?', '!', '&', '*', '|', '>', '#', '\'', '"', '%', '@', '`', '<', '.', '\t':
			n += 2
			directive = directive || c == '%' // the lexer may start a directive after a tag ("! %0 0 0")
		case ' ':
			if directive {
				n += 2
			}
		}
	}
	return n
}

type yamlLevelKind uint8

const (
	levelSeq yamlLevelKind = iota // a block sequence entry (-)
	levelMap                      // a block mapping value (:)
	levelKey                      // an explicit block key (?)
)

// yamlLevel is one open block level: its indicator's column (for a pair,
// its key's), its kind and the levels it counts for.
type yamlLevel struct {
	col    int
	kind   yamlLevelKind
	weight int
}

// flowFrame is one open flow collection; extra counts the levels opened
// inside its current entry (a pair in a sequence, an explicit key), closed
// by the next , or its bracket.
type flowFrame struct {
	seq   bool
	extra int
}

// yamlDepth measures the nesting of the token stream (see YAML) and
// returns the deepest level reached, stopping as soon as it exceeds max,
// and the line where it did.
//
// Collections are measured exactly (up to pairs and explicit keys, which
// count a level of their own). Tags and anchors, which the parser nests as
// nodes around the node they precede, are counted without working out
// which node that is: every tag and anchor since the last top-level entry
// (a line starting at column 1 with anything but -, after a line that does
// not end in a tag or an anchor) counts one level, and so does every one
// met outside any collection since the start of the document.
func yamlDepth(tokens token.Tokens, max int) (depth, line int) {
	var (
		block      []yamlLevel
		blockDepth int
		flow       []flowFrame
		flowDepth  int
		wrappers   int // tags and anchors inside the current top-level entry
		// rootWrappers are the tags and anchors met outside any collection
		// in this document: they may wrap its root.
		rootWrappers int
		deepest      int
		prev, prev2  *token.Token // the last two tokens
		entryCol     int          // column of the current block entry on this line
		pinned       bool         // a line continued a node at or left of its column
	)
	for _, tk := range tokens {
		if tk.Type == token.CommentType || tk.Position == nil {
			continue
		}
		col, ln := tk.Position.Column, tk.Position.Line
		inFlow := len(flow) > 0
		// goccy/go-yaml takes the line after an indicator, tag, anchor or
		// alias that ends its line for that node's content (or name)
		// whatever its column ("-\n0:" is a sequence of a mapping): only a
		// line after a complete value (a scalar, not an anchor's or alias's
		// name, or the end of a flow collection) can end a level.
		dangling := prev != nil && !(completes(prev) && (prev2 == nil || prev2.Type != token.AnchorType && prev2.Type != token.AliasType))
		// A : that starts a line belongs to the key before it.
		firstOfLine := !inFlow && (prev == nil || ln > endLine(prev)) && tk.Type != token.MappingValueType
		if firstOfLine && dangling && len(block) > 0 && col <= block[len(block)-1].col {
			// Content not indented past the node it continues: goccy keeps what follows at
			// this column inside it, so no level open now ends there (nor its column-1 tags).
			for i := range block {
				block[i].col = min(block[i].col, col-1)
			}
			pinned = true
		}
		if firstOfLine && !dangling {
			// The first token of any other line ends the block levels it
			// is left of; one at the same column is a sibling, except
			// that a sequence may be the value of a key (or of an explicit
			// key) at its own column.
			for len(block) > 0 {
				top := block[len(block)-1]
				if top.col < col || top.col == col && tk.Type == token.SequenceEntryType && (top.kind == levelMap || top.kind == levelKey) {
					break
				}
				block = block[:len(block)-1]
				blockDepth -= top.weight
			}
			if col == 1 && tk.Type != token.SequenceEntryType && prev != nil && !pinned {
				wrappers = 0
			}
		}
		if firstOfLine {
			entryCol = col
		} else if !inFlow && prev != nil && (prev.Type == token.SequenceEntryType || prev.Type == token.MappingKeyType) {
			entryCol = col // the entry after - or ? starts here
		}
		push := func(kind yamlLevelKind, c, w int) {
			block = append(block, yamlLevel{col: c, kind: kind, weight: w})
			blockDepth += w
		}
		switch tk.Type {
		case token.SequenceStartType, token.MappingStartType:
			flow = append(flow, flowFrame{seq: tk.Type == token.SequenceStartType})
			flowDepth++
		case token.SequenceEndType, token.MappingEndType:
			if inFlow {
				f := flow[len(flow)-1]
				flow = flow[:len(flow)-1]
				flowDepth -= 1 + f.extra
			}
		case token.CollectEntryType:
			if inFlow {
				f := &flow[len(flow)-1]
				flowDepth -= f.extra
				f.extra = 0
			}
		case token.SequenceEntryType:
			if !inFlow {
				push(levelSeq, col, 1)
			} else {
				// goccy/go-yaml parses "- x" inside a flow collection as
				// a block sequence nested in the entry ("[- 0]" is two
				// levels): it counts until the entry ends, as a key does.
				flow[len(flow)-1].extra++
				flowDepth++
			}
		case token.MappingKeyType:
			if !inFlow {
				push(levelKey, col, 2)
			} else {
				flow[len(flow)-1].extra += 2
				flowDepth += 2
			}
		case token.MappingValueType:
			if !inFlow {
				push(levelMap, entryCol, 1)
			} else if f := &flow[len(flow)-1]; f.seq {
				f.extra++
				flowDepth++
			}
		case token.TagType, token.AnchorType:
			if len(block) == 0 && !inFlow {
				rootWrappers++ // they may wrap the whole document
			} else {
				wrappers++
			}
		case token.DocumentHeaderType, token.DocumentEndType:
			if !inFlow {
				rootWrappers, block, blockDepth, pinned = 0, block[:0], 0, false
			}
		}
		prev2, prev = prev, tk
		if d := blockDepth + flowDepth + wrappers + rootWrappers; d > deepest {
			deepest = d
			if d > max {
				return d, ln
			}
		}
	}
	return deepest, 0
}

// completes reports whether tk ends a node: a scalar (including a block
// scalar's content) or a flow collection's closing bracket, as opposed to
// an indicator, tag, anchor, alias or directive that the next token
// continues.
func completes(tk *token.Token) bool {
	switch tk.Type {
	case token.SequenceEntryType, token.MappingKeyType, token.MappingValueType, token.MergeKeyType,
		token.TagType, token.AnchorType, token.AliasType, token.LiteralType, token.FoldedType,
		token.SequenceStartType, token.MappingStartType, token.CollectEntryType, token.DirectiveType:
		return false
	}
	return true
}

// endLine is the line a token ends on.
func endLine(tk *token.Token) int {
	return tk.Position.Line + strings.Count(strings.TrimSpace(tk.Origin), "\n")
}
