package manifest

import (
	"cmp"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Error is a manifest that did not load. It lists every problem found, each
// naming the field it is about, one per line:
//
//	pkg/agentnode.yaml: capabilities.tools[0].entrypoint: missing
//
// A manifest that cannot be read at all (missing file, I/O error) is an
// *Error too; Unwrap returns the cause.
type Error struct {
	File     string    // the manifest's path, as derived from the directory given to Load
	Problems []Problem // sorted by field; never empty
	cause    error
}

// Problem is one thing wrong with a manifest.
type Problem struct {
	// Field is the dotted path of the offending field, e.g.
	// "capabilities.tools[0].entrypoint"; empty when the problem is about the
	// file as a whole (unreadable, not YAML).
	Field string
	Msg   string
}

func (p Problem) String() string {
	if p.Field == "" {
		return p.Msg
	}
	return p.Field + ": " + p.Msg
}

func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.File)
		b.WriteString(": ")
		b.WriteString(p.String())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.cause }

// Has reports whether a problem names field and its message contains msg.
func (e *Error) Has(field, msg string) bool {
	for _, p := range e.Problems {
		if p.Field == field && strings.Contains(p.Msg, msg) {
			return true
		}
	}
	return false
}

func newError(file string, cause error, problems ...Problem) *Error {
	slices.SortStableFunc(problems, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Field, b.Field), cmp.Compare(a.Msg, b.Msg))
	})
	problems = slices.Compact(problems)
	return &Error{File: file, Problems: problems, cause: cause}
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// fieldPath builds dotted paths: keys as .key (or ["odd key"]), array
// indexes as [i].
type fieldPath string

func (p fieldPath) key(k string) fieldPath {
	if !plainKey.MatchString(k) {
		return p + fieldPath("["+strconv.Quote(k)+"]")
	}
	if p == "" {
		return fieldPath(k)
	}
	return p + "." + fieldPath(k)
}

func (p fieldPath) index(i int) fieldPath {
	return p + fieldPath("["+strconv.Itoa(i)+"]")
}

// instancePath formats a JSON Schema instance location. The document tells
// array indexes from object keys that look like numbers.
func instancePath(tokens []string, doc any) fieldPath {
	var p fieldPath
	for _, t := range tokens {
		switch v := doc.(type) {
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(v) {
				return p.key(t)
			}
			p, doc = p.index(i), v[i]
		case map[string]any:
			p, doc = p.key(t), v[t]
		default:
			p, doc = p.key(t), nil
		}
	}
	return p
}
