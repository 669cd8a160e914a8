package lockfile

import (
	"errors"
	"fmt"
	"strconv"
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
