package lockfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// decoderParseValue is the encoding/json Decoder.Token based ParseValue that
// the hand-written scanner replaced (4 to 5 times slower); the fuzz test
// holds the scanner to exactly its results.
func decoderParseValue(data []byte) (*Value, error) {
	if len(data) > MaxSize {
		return nil, invalid("larger than %d bytes", MaxSize)
	}
	if !utf8.Valid(data) {
		return nil, invalid("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := &decoderParser{dec: dec}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalid("data after the JSON document (byte %d)", dec.InputOffset())
	}
	if err := decoderCheckSurrogates(data); err != nil {
		return nil, err
	}
	return v, nil
}

// decoderParser walks the decoder's tokens. path is where it is, printed only
// in errors and only with names that are safe to print (see elem.String).
type decoderParser struct {
	dec  *json.Decoder
	path []elem
}

func (p *decoderParser) where() string {
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
func (p *decoderParser) syntax(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return invalid("not valid JSON (byte %d)", se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalid("not valid JSON (truncated)")
	}
	return invalid("not valid JSON (byte %d)", p.dec.InputOffset())
}

func (p *decoderParser) value(depth int) (*Value, error) {
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

func (p *decoderParser) object(depth int) (*Value, error) {
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

func (p *decoderParser) array(depth int) (*Value, error) {
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

// decoderCheckSurrogates refuses \u escapes that encode a lone UTF-16 surrogate.
// encoding/json would silently turn them into U+FFFD, so two different
// files would canonicalize to the same bytes; Python cannot encode them
// as UTF-8 at all. data is already known to be valid JSON.
func decoderCheckSurrogates(data []byte) error {
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
			r := decoderHex4(data[i+1 : i+5])
			i += 4
			switch {
			case r >= 0xD800 && r < 0xDC00:
				if i+6 < len(data) && data[i+1] == '\\' && data[i+2] == 'u' {
					if r2 := decoderHex4(data[i+3 : i+7]); r2 >= 0xDC00 && r2 < 0xE000 {
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

func decoderHex4(b []byte) rune {
	n, err := strconv.ParseUint(string(b), 16, 32)
	if err != nil {
		return -1
	}
	return rune(n)
}
