package lock

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// Canonical returns the canonical JSON of v, byte for byte what Python's
// json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
// writes for the same document (specs/lockfile.md): object keys sorted by
// code point at every level, no whitespace, numbers exactly as they were
// read, strings escaped like Python (only ", \ and control characters;
// non-ASCII, <, >, &, U+2028 and U+2029 are written raw).
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
		return appendString(b, v.Str)
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
			b = appendString(b, m.Key)
			b = append(b, ':')
			if indent != "" {
				b = append(b, ' ')
			}
			b = appendValue(b, m.Value, indent, depth+1)
		}
		b = newline(b, indent, depth)
		return append(b, '}')
	}
	panic("lock: value of unknown kind")
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

const hexDigits = "0123456789abcdef"

// appendString writes s quoted the way Python's json module does with
// ensure_ascii=False: \" \\ \n \r \t \b \f, other characters below U+0020
// as \u00xx (lower-case hex), everything else raw.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf || (c >= 0x20 && c != '"' && c != '\\') {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
