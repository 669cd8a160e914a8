package lockfile

import (
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ParseValue parses one JSON document strictly (see Parse) into a Value.
//
// It is a single pass over the bytes by a small recursive-descent scanner
// (RFC 8259, the grammar encoding/json accepts) that builds the Value tree
// and checks duplicate keys as it goes: about 6 times faster than walking
// encoding/json's Decoder.Token, which it replaced and whose results it
// reproduces exactly (FuzzParseValue; numbers in doc.go).
func ParseValue(data []byte) (*Value, error) {
	if len(data) > MaxSize {
		return nil, invalid("larger than %d bytes", MaxSize)
	}
	if !utf8.Valid(data) {
		return nil, invalid("not valid UTF-8")
	}
	s := &scanner{data: data}
	s.skipSpace()
	v, err := s.value(0)
	if err != nil {
		return nil, err
	}
	s.skipSpace()
	if s.pos < len(s.data) {
		return nil, invalid("data after the JSON document (byte %d)", s.pos)
	}
	return v, nil
}

// scanner is the state of one ParseValue. path is where it is, printed
// only in errors and only with names that are safe to print (see
// elem.String).
type scanner struct {
	data []byte
	pos  int
	path []elem
	// slab hands out Values in blocks: one allocation per block instead
	// of one per value.
	slab []Value
	// buf is scratch space for strings with escapes.
	buf []byte
}

// slabSize is the number of Values allocated at once.
const slabSize = 256

func (s *scanner) alloc(k Kind) *Value {
	if len(s.slab) == 0 {
		s.slab = make([]Value, slabSize)
	}
	v := &s.slab[0]
	s.slab = s.slab[1:]
	v.Kind = k
	return v
}

// skipSpace skips JSON whitespace: space, tab, line feed, carriage return.
func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// syntax is the error for the byte at s.pos: never the byte itself.
func (s *scanner) syntax() error {
	if s.pos >= len(s.data) {
		return invalid("not valid JSON (truncated)")
	}
	return invalid("not valid JSON (byte %d)", s.pos)
}

func (s *scanner) value(depth int) (*Value, error) {
	if depth > MaxDepth {
		return nil, invalid("nested deeper than %d levels (byte %d)", MaxDepth, s.pos)
	}
	if s.pos >= len(s.data) {
		return nil, s.syntax()
	}
	switch c := s.data[s.pos]; c {
	case '{':
		return s.object(depth)
	case '[':
		return s.array(depth)
	case '"':
		str, err := s.str()
		if err != nil {
			return nil, err
		}
		v := s.alloc(String)
		v.Str = str
		return v, nil
	case 't':
		if err := s.literal("true"); err != nil {
			return nil, err
		}
		v := s.alloc(Bool)
		v.Bool = true
		return v, nil
	case 'f':
		if err := s.literal("false"); err != nil {
			return nil, err
		}
		return s.alloc(Bool), nil
	case 'n':
		if err := s.literal("null"); err != nil {
			return nil, err
		}
		return s.alloc(Null), nil
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return s.number()
		}
		return nil, s.syntax()
	}
}

func (s *scanner) literal(word string) error {
	for i := 0; i < len(word); i++ {
		if s.pos >= len(s.data) || s.data[s.pos] != word[i] {
			return s.syntax()
		}
		s.pos++
	}
	return nil
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and keeps
// the literal as written.
func (s *scanner) number() (*Value, error) {
	d := s.data
	start := s.pos
	i := s.pos
	if d[i] == '-' {
		i++
	}
	digits := func() bool {
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		return i > j
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case !digits():
		s.pos = i
		return nil, s.syntax()
	}
	if i < len(d) && d[i] == '.' {
		i++
		if !digits() {
			s.pos = i
			return nil, s.syntax()
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if !digits() {
			s.pos = i
			return nil, s.syntax()
		}
	}
	s.pos = i
	v := s.alloc(Number)
	v.Str = string(d[start:i])
	return v, nil
}

// str scans a string starting at its opening quote and returns its text.
// A key or value agentnode defines comes back interned (no allocation).
func (s *scanner) str() (string, error) {
	d := s.data
	start := s.pos + 1
	for i := start; i < len(d); i++ {
		switch c := d[i]; {
		case c == '"':
			s.pos = i + 1
			if k, ok := interned[string(d[start:i])]; ok {
				return k, nil
			}
			return string(d[start:i]), nil
		case c == '\\':
			return s.escaped(start, i)
		case c < 0x20:
			s.pos = i
			return "", invalid("not valid JSON: a control character in a string (byte %d)", i)
		}
	}
	s.pos = len(d)
	return "", s.syntax()
}

// escaped finishes a string from its first backslash at i. A \u escape of
// a lone UTF-16 surrogate is an error: encoding/json would silently turn it
// into U+FFFD, so two different files would canonicalize to the same
// bytes, and Python cannot encode it as UTF-8 at all.
func (s *scanner) escaped(start, i int) (string, error) {
	d := s.data
	b := append(s.buf[:0], d[start:i]...)
	for i < len(d) {
		c := d[i]
		switch {
		case c == '"':
			s.pos = i + 1
			s.buf = b
			return string(b), nil
		case c < 0x20:
			s.pos = i
			return "", invalid("not valid JSON: a control character in a string (byte %d)", i)
		case c != '\\':
			b = append(b, c)
			i++
			continue
		}
		// A backslash.
		if i+1 >= len(d) {
			s.pos = len(d)
			return "", s.syntax()
		}
		esc := d[i+1]
		i += 2
		switch esc {
		case '"', '\\', '/':
			b = append(b, esc)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			at := i - 2
			r, ok := hex4(d, i)
			if !ok {
				s.pos = at
				return "", s.syntax()
			}
			i += 4
			if utf16.IsSurrogate(r) {
				var r2 rune = -1
				if r < 0xDC00 && i+1 < len(d) && d[i] == '\\' && d[i+1] == 'u' {
					if r2, ok = hex4(d, i+2); !ok {
						s.pos = i
						return "", s.syntax()
					}
				}
				r = utf16.DecodeRune(r, r2)
				if r == utf8.RuneError {
					return "", invalid("a string holds an unpaired UTF-16 surrogate escape (byte %d)", at)
				}
				i += 6
			}
			b = utf8.AppendRune(b, r)
		default:
			s.pos = i - 1
			return "", s.syntax()
		}
	}
	s.pos = len(d)
	return "", s.syntax()
}

// hex4 decodes the four hex digits at d[i:].
func hex4(d []byte, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// smallObject is the member count up to which duplicate keys are found by
// comparing with every earlier key; larger objects use a set.
const smallObject = 16

func (s *scanner) object(depth int) (*Value, error) {
	s.pos++ // '{'
	v := s.alloc(Object)
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return v, nil
	}
	inEntry := len(s.path) == 1 && !s.path[0].array && s.path[0].key == FieldPackages
	var seen map[string]struct{}
	for {
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return nil, s.syntax()
		}
		key, err := s.str()
		if err != nil {
			return nil, err
		}
		if s.duplicate(v.Obj, &seen, key) {
			return nil, invalid("duplicate key in %s (byte %d)", s.where(), s.pos)
		}
		s.skipSpace()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return nil, s.syntax()
		}
		s.pos++
		s.skipSpace()
		s.path = append(s.path, elem{key: key, index: len(v.Obj), inEntry: inEntry})
		val, err := s.value(depth + 1)
		if err != nil {
			return nil, err
		}
		s.path = s.path[:len(s.path)-1]
		v.Obj = append(v.Obj, Member{Key: key, Value: val})
		s.skipSpace()
		if s.pos >= len(s.data) {
			return nil, s.syntax()
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			s.skipSpace()
		case '}':
			s.pos++
			return v, nil
		default:
			return nil, s.syntax()
		}
	}
}

// duplicate reports whether key is among the keys of members; seen is the
// set of those keys once there are more than smallObject.
func (s *scanner) duplicate(members []Member, seen *map[string]struct{}, key string) bool {
	if len(members) < smallObject {
		for i := range members {
			if members[i].Key == key {
				return true
			}
		}
		return false
	}
	if *seen == nil {
		*seen = make(map[string]struct{}, 2*len(members))
		for i := range members {
			(*seen)[members[i].Key] = struct{}{}
		}
	}
	if _, dup := (*seen)[key]; dup {
		return true
	}
	(*seen)[key] = struct{}{}
	return false
}

func (s *scanner) array(depth int) (*Value, error) {
	s.pos++ // '['
	v := s.alloc(Array)
	v.Arr = []*Value{}
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return v, nil
	}
	s.path = append(s.path, elem{array: true})
	for {
		s.path[len(s.path)-1].index = len(v.Arr)
		val, err := s.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v.Arr = append(v.Arr, val)
		s.skipSpace()
		if s.pos >= len(s.data) {
			return nil, s.syntax()
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			s.skipSpace()
		case ']':
			s.pos++
			s.path = s.path[:len(s.path)-1]
			return v, nil
		default:
			return nil, s.syntax()
		}
	}
}

// elem is one step of a path: an object member (key and its position) or
// an array index.
type elem struct {
	key     string
	index   int
	array   bool
	inEntry bool // a member of the packages object, i.e. an entry
}

// String prints field names agentnode defines as themselves, lockfile
// entries by position ("entry #3"), array indices, and any other key as
// "(key)". Content of the file is never printed.
func (e elem) String() string {
	switch {
	case e.array:
		return fmt.Sprintf("[%d]", e.index)
	case e.inEntry:
		return fmt.Sprintf("entry #%d", e.index+1)
	case knownNames[e.key]:
		return e.key
	}
	return "(key)"
}

func (s *scanner) where() string { return pathString(s.path) }

// pathString prints a path (see elem.String).
func pathString(path []elem) string {
	if len(path) == 0 {
		return "the top level"
	}
	var b strings.Builder
	for i, e := range path {
		if i > 0 && !e.array {
			b.WriteByte('.')
		}
		b.WriteString(e.String())
	}
	return b.String()
}

// knownNames are the member names of the lockfile format.
var knownNames = func() map[string]bool {
	m := map[string]bool{}
	for _, list := range [][]string{topLevelFields, mutableFields, canonicalV3, integrityFields, sealFields,
		{"algorithm", "canonical_version", "canonicalization_version", "hash", "key_id", "name"}} {
		for _, k := range list {
			m[k] = true
		}
	}
	return m
}()

// interned are strings that recur in every lockfile: the format's names,
// the manifest's tool and permission names, and their common values. The
// scanner returns these without allocating.
var interned = func() map[string]string {
	m := map[string]string{}
	for k := range knownNames {
		m[k] = k
	}
	for _, k := range []string{
		// manifest fields inside entries
		"description", "action_type", "input_schema", "output_schema", "network", "filesystem",
		"code_execution", "level", "allowed_domains",
		// JSON Schema words
		"type", "properties", "required", "items", "object", "string", "integer", "number", "boolean",
		"array", "null", "enum", "format", "maxLength", "minLength", "maximum", "minimum",
		// values
		AlgorithmSHA256, AlgorithmSeal, "toolpack", "agent", "mcp_server", "exec", "python", "mcp",
		"none", "restricted", "unrestricted", "read", "compute", "write_local", "write_external",
		"delete", "execute", "credential_use", "network_egress", "unknown", "unverified", "verified",
		"trusted", "curated", "local", Version,
	} {
		m[k] = k
	}
	return m
}()
