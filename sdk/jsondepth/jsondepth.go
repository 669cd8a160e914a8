// Package jsondepth measures how deeply a JSON document nests before any
// decoder sees it: Go's decoders recurse, so a document nested hundreds of
// thousands of levels deep costs them time and memory in proportion. It is
// the one implementation of that pre-check, in sdk/ so that both the kernel
// (kernel/bounded) and third-party plugins (sdk/guard) use it.
package jsondepth

// Exceeds reports whether data nests objects and arrays more than max
// levels deep ({"a":1} is 1 level, [[1]] is 2) and, if so, the offset of
// the bracket that went past max. It is an iterative scan that skips
// strings (with their escapes) and never allocates; it does not check that
// data is JSON, so it may run before any decoder. For any data a decoder
// accepts, the depth it counts is exactly the decoder's; on data a decoder
// refuses it still bounds what the decoder can see before the syntax error,
// since it counts every bracket outside a string.
func Exceeds(data []byte, max int) (offset int, exceeded bool) {
	depth := 0
	inString, escaped := false, false
	for i, c := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > max {
				return i, true
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return 0, false
}
