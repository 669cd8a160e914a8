package lock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind is the JSON type of a Value.
type Kind uint8

// JSON types.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "a boolean"
	case Number:
		return "a number"
	case String:
		return "a string"
	case Array:
		return "an array"
	case Object:
		return "an object"
	}
	return "unknown"
}

// Value is one JSON value. Numbers keep the literal as written (Str), so
// 1.0 stays 1.0; objects keep their members in file order.
type Value struct {
	Kind Kind
	Bool bool
	Str  string // String: the text; Number: the literal as written
	Arr  []*Value
	Obj  []Member
}

// Member is one key/value pair of an object.
type Member struct {
	Key   string
	Value *Value
}

// Str returns a string value.
func Str(s string) *Value { return &Value{Kind: String, Str: s} }

// Int returns an integer number value.
func Int(n int) *Value { return &Value{Kind: Number, Str: strconv.Itoa(n)} }

// Obj returns an object with the given members, in order.
func Obj(members ...Member) *Value { return &Value{Kind: Object, Obj: members} }

// Get returns the value of key in object v, or nil if v is not an object or
// has no such key.
func (v *Value) Get(key string) *Value {
	if v == nil || v.Kind != Object {
		return nil
	}
	for _, m := range v.Obj {
		if m.Key == key {
			return m.Value
		}
	}
	return nil
}

// Set replaces the value of key in object v, or appends key if absent.
func (v *Value) Set(key string, val *Value) {
	for i := range v.Obj {
		if v.Obj[i].Key == key {
			v.Obj[i].Value = val
			return
		}
	}
	v.Obj = append(v.Obj, Member{Key: key, Value: val})
}

// Delete removes key from object v and reports whether it was there.
func (v *Value) Delete(key string) bool {
	for i := range v.Obj {
		if v.Obj[i].Key == key {
			v.Obj = append(v.Obj[:i:i], v.Obj[i+1:]...)
			return true
		}
	}
	return false
}

// MaxSize bounds a lockfile; MaxDepth bounds the nesting of its values.
const (
	MaxSize  = 64 << 20
	MaxDepth = 128
)

// ErrInvalid is wrapped by every error about a lockfile's content: not
// JSON, duplicate keys, wrong types. Its messages never contain content of
// the file.
var ErrInvalid = errors.New("invalid lockfile")

// invalid returns an ErrInvalid error.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// ParseValue parses one JSON document strictly (see Parse) into a Value.
func ParseValue(data []byte) (*Value, error) {
	if len(data) > MaxSize {
		return nil, invalid("larger than %d bytes", MaxSize)
	}
	if !utf8.Valid(data) {
		return nil, invalid("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := &parser{dec: dec}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalid("data after the JSON document (byte %d)", dec.InputOffset())
	}
	if err := checkSurrogates(data); err != nil {
		return nil, err
	}
	return v, nil
}

// parser walks the decoder's tokens. path is where it is, printed only
// in errors and only with names that are safe to print (see elem.String).
type parser struct {
	dec  *json.Decoder
	path []elem
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

func (p *parser) where() string {
	if len(p.path) == 0 {
		return "the top level"
	}
	var b strings.Builder
	for i, e := range p.path {
		if i > 0 && !e.array {
			b.WriteByte('.')
		}
		b.WriteString(e.String())
	}
	return b.String()
}

// syntax turns a decoder error into a message without content: Go's
// syntax errors quote the offending character.
func (p *parser) syntax(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return invalid("not valid JSON (byte %d)", se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalid("not valid JSON (truncated)")
	}
	return invalid("not valid JSON (byte %d)", p.dec.InputOffset())
}

func (p *parser) value(depth int) (*Value, error) {
	if depth > MaxDepth {
		return nil, invalid("nested deeper than %d levels (byte %d)", MaxDepth, p.dec.InputOffset())
	}
	tok, err := p.dec.Token()
	if err != nil {
		return nil, p.syntax(err)
	}
	switch t := tok.(type) {
	case nil:
		return &Value{Kind: Null}, nil
	case bool:
		return &Value{Kind: Bool, Bool: t}, nil
	case json.Number:
		return &Value{Kind: Number, Str: string(t)}, nil
	case string:
		return &Value{Kind: String, Str: t}, nil
	case json.Delim:
		switch t {
		case '{':
			return p.object(depth)
		case '[':
			return p.array(depth)
		}
	}
	return nil, invalid("not valid JSON (byte %d)", p.dec.InputOffset())
}

func (p *parser) object(depth int) (*Value, error) {
	v := &Value{Kind: Object}
	seen := map[string]bool{}
	for p.dec.More() {
		tok, err := p.dec.Token()
		if err != nil {
			return nil, p.syntax(err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, invalid("not valid JSON (byte %d)", p.dec.InputOffset())
		}
		if seen[key] {
			return nil, invalid("duplicate key in %s (byte %d)", p.where(), p.dec.InputOffset())
		}
		seen[key] = true
		inEntry := len(p.path) == 1 && !p.path[0].array && p.path[0].key == "packages"
		p.path = append(p.path, elem{key: key, index: len(v.Obj), inEntry: inEntry})
		val, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		p.path = p.path[:len(p.path)-1]
		v.Obj = append(v.Obj, Member{Key: key, Value: val})
	}
	if _, err := p.dec.Token(); err != nil { // '}'
		return nil, p.syntax(err)
	}
	return v, nil
}

func (p *parser) array(depth int) (*Value, error) {
	v := &Value{Kind: Array, Arr: []*Value{}}
	p.path = append(p.path, elem{array: true})
	for p.dec.More() {
		p.path[len(p.path)-1].index = len(v.Arr)
		val, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v.Arr = append(v.Arr, val)
	}
	p.path = p.path[:len(p.path)-1]
	if _, err := p.dec.Token(); err != nil { // ']'
		return nil, p.syntax(err)
	}
	return v, nil
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

// checkSurrogates refuses \u escapes that encode a lone UTF-16 surrogate.
// encoding/json would silently turn them into U+FFFD, so two different
// files would canonicalize to the same bytes; Python cannot encode them
// as UTF-8 at all. data is already known to be valid JSON.
func checkSurrogates(data []byte) error {
	in := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !in {
			in = c == '"'
			continue
		}
		switch c {
		case '"':
			in = false
		case '\\':
			i++
			if data[i] != 'u' {
				continue
			}
			r := hex4(data[i+1 : i+5])
			i += 4
			switch {
			case r >= 0xD800 && r < 0xDC00:
				if i+6 < len(data) && data[i+1] == '\\' && data[i+2] == 'u' {
					if r2 := hex4(data[i+3 : i+7]); r2 >= 0xDC00 && r2 < 0xE000 {
						i += 6
						continue
					}
				}
				return invalid("a string holds an unpaired UTF-16 surrogate escape (byte %d)", i-5)
			case r >= 0xDC00 && r < 0xE000:
				return invalid("a string holds an unpaired UTF-16 surrogate escape (byte %d)", i-5)
			}
		}
	}
	return nil
}

func hex4(b []byte) rune {
	n, err := strconv.ParseUint(string(b), 16, 32)
	if err != nil {
		return -1
	}
	return rune(n)
}
