package bounded

// JSONDepth returns a *DepthError (ErrTooDeep) if data nests objects and
// arrays more than max levels deep: {"a":1} is 1 level, [[1]] 2. It is an
// iterative scan that skips strings (with their escapes) and never
// allocates; it does not check that data is JSON, so it may run before any
// decoder. For any data a decoder accepts, the depth it counts is exactly
// the decoder's; on data a decoder refuses it still bounds what the decoder
// can see before the syntax error, since it counts every bracket outside a
// string.
func JSONDepth(data []byte, max int) error {
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
				return &DepthError{Max: max, Offset: int64(i)}
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}
