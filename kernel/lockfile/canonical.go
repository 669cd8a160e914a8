package lockfile

import (
	"slices"
	"strings"

	"github.com/agentnode/agentnode/kernel/jsonstr"
)

// Canonical returns the canonical JSON of v, byte for byte what Python's
// json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
// writes for the same document (specs/lockfile.md): object keys sorted by
// code point at every level, no whitespace, numbers exactly as they were
// read, strings escaped like Python (only ", \ and control characters;
// non-ASCII, <, >, &, U+2028 and U+2029 are written raw: kernel/jsonstr's
// AppendPython).
func Canonical(v *Value) []byte {
	var b []byte
	return appendValue(b, v, "", 0)
}

// Indented returns v as JSON indented by two spaces per level, members in
// their stored order, strings escaped as in Canonical, with a final newline.
// It is the lockfile's on-disk form.
func Indented(v *Value) []byte {
	b := appendValue(nil, v, "  ", 0)
	return append(b, '\n')
}

// appendValue appends v. An empty indent means canonical form (sorted keys,
// no whitespace); otherwise stored order, indented.
func appendValue(b []byte, v *Value, indent string, depth int) []byte {
	switch v.Kind {
	case Null:
		return append(b, "null"...)
	case Bool:
		if v.Bool {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case Number:
		return append(b, v.Str...)
	case String:
		return jsonstr.AppendPython(b, v.Str)
	case Array:
		if len(v.Arr) == 0 {
			return append(b, "[]"...)
		}
		b = append(b, '[')
		for i, e := range v.Arr {
			if i > 0 {
				b = append(b, ',')
			}
			b = newline(b, indent, depth+1)
			b = appendValue(b, e, indent, depth+1)
		}
		b = newline(b, indent, depth)
		return append(b, ']')
	case Object:
		if len(v.Obj) == 0 {
			return append(b, "{}"...)
		}
		members := v.Obj
		if indent == "" {
			members = slices.Clone(v.Obj)
			// Go compares strings bytewise; for valid UTF-8 that is code
			// point order, which is Python's str order.
			slices.SortFunc(members, func(x, y Member) int { return strings.Compare(x.Key, y.Key) })
		}
		b = append(b, '{')
		for i, m := range members {
			if i > 0 {
				b = append(b, ',')
			}
			b = newline(b, indent, depth+1)
			b = jsonstr.AppendPython(b, m.Key)
			b = append(b, ':')
			if indent != "" {
				b = append(b, ' ')
			}
			b = appendValue(b, m.Value, indent, depth+1)
		}
		b = newline(b, indent, depth)
		return append(b, '}')
	}
	panic("lockfile: value of unknown kind")
}

func newline(b []byte, indent string, depth int) []byte {
	if indent == "" {
		return b
	}
	b = append(b, '\n')
	for range depth {
		b = append(b, indent...)
	}
	return b
}
