// Package schemacheck validates a tool input against the tool's input schema
// for Guard: the host does it once per call and hands the result to every
// inspector in guard.InspectRequest.SchemaCheck, so an inspector need not
// link a JSON Schema validator (whose package initialization alone costs
// milliseconds of every plugin start). guardtest uses it to fill the same
// field for golden cases.
//
// Schemas are JSON Schema draft 2020-12 unless $schema says otherwise
// (github.com/santhosh-tekuri/jsonschema/v6); external $refs are refused, so
// a package's schema can never make the host read a file or reach the
// network. Results name keywords and input locations, never input values.
package schemacheck

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/agentnode/agentnode/sdk/guard"
)

// schemaURL is where a schema is compiled; nothing is ever loaded from it.
const schemaURL = "mem:///input_schema.json"

// noLoader refuses every external reference.
type noLoader struct{}

func (noLoader) Load(string) (any, error) {
	return nil, errors.New("external schema references are not allowed")
}

// compiled is a compiled schema, or why it was refused.
type compiled struct {
	s       *jsonschema.Schema
	problem string
}

// compile parses and compiles raw, a non-empty schema. problem, when not
// empty, says why the schema is refused (it never quotes the schema).
func compile(raw []byte) compiled {
	if p := guard.SchemaTooBig(raw); p != "" {
		return compiled{problem: p}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return compiled{problem: "the input schema is not valid JSON"}
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return compiled{problem: "the input schema is neither an object nor a boolean"}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return compiled{problem: "the input schema cannot be loaded"}
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return compiled{problem: "the input schema does not compile"}
	}
	return compiled{s: s}
}

// Checker validates inputs, keeping the schemas it compiled by the SHA-256
// of their text (a long-lived host sees the same few schemas again and
// again). It is safe for concurrent use.
type Checker struct {
	mu  sync.Mutex
	max int
	m   map[[sha256.Size]byte]compiled
}

// NewChecker returns a Checker keeping up to maxSchemas compiled schemas.
func NewChecker(maxSchemas int) *Checker {
	return &Checker{max: max(1, maxSchemas), m: make(map[[sha256.Size]byte]compiled)}
}

func (c *Checker) get(raw []byte) compiled {
	sum := sha256.Sum256(raw)
	c.mu.Lock()
	e, ok := c.m[sum]
	c.mu.Unlock()
	if ok {
		return e
	}
	e = compile(raw)
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[sum] = e
	c.mu.Unlock()
	return e
}

// Check validates input against schema. It returns nil when there is no
// schema (empty or JSON null): nothing to check. A schema that is refused
// gives a SchemaCheck with Problem set; input that is not JSON gives one
// violation at the whole input.
func (c *Checker) Check(schema, input []byte) *guard.SchemaCheck {
	schema = bytes.TrimSpace(schema)
	if len(schema) == 0 || string(schema) == "null" {
		return nil
	}
	e := c.get(schema)
	if e.problem != "" {
		return &guard.SchemaCheck{Problem: e.problem}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(input))
	if err != nil {
		return &guard.SchemaCheck{Violations: []guard.SchemaViolation{{Detail: "the input is not valid JSON"}}}
	}
	err = e.s.Validate(doc)
	if err == nil {
		return &guard.SchemaCheck{}
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &guard.SchemaCheck{Violations: []guard.SchemaViolation{{Detail: "the input could not be validated against the input schema"}}}
	}
	return violations(ve)
}

// Check is Checker.Check with a new Checker (no schema kept).
func Check(schema, input []byte) *guard.SchemaCheck { return NewChecker(1).Check(schema, input) }

// violations turns a validation error tree into its failed leaves. The tree
// is as deep as the schema and the input, both bounded. Its order is not
// stable (maps), so the leaves are ordered by location and description and
// only the first guard.MaxSchemaViolations are kept; the rest are counted.
func violations(ve *jsonschema.ValidationError) *guard.SchemaCheck {
	var (
		best  []*leaf
		total int
	)
	keep := func(lf *leaf) {
		total++
		if len(best) == guard.MaxSchemaViolations && lf.compare(best[len(best)-1]) >= 0 {
			return
		}
		i, found := slices.BinarySearchFunc(best, lf, (*leaf).compare)
		if found {
			total-- // the same finding again
			return
		}
		best = slices.Insert(best, i, lf)
		if len(best) > guard.MaxSchemaViolations {
			best = best[:guard.MaxSchemaViolations]
		}
	}
	var visit func(e *jsonschema.ValidationError)
	visit = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				visit(c)
			}
			return
		}
		if k, ok := e.ErrorKind.(*kind.Required); ok {
			for _, name := range k.Missing {
				loc := append(slices.Clip(e.InstanceLocation), name)
				keep(&leaf{loc: loc, detail: "required: the property is missing"})
			}
			return
		}
		keep(&leaf{loc: slices.Clone(e.InstanceLocation), kind: e.ErrorKind})
	}
	visit(ve)
	out := &guard.SchemaCheck{Omitted: total - len(best)}
	for _, lf := range best {
		out.Violations = append(out.Violations, guard.SchemaViolation{Location: lf.loc, Detail: lf.describe()})
	}
	return out
}

// leaf is one failed keyword at one instance location.
type leaf struct {
	loc    []string
	kind   jsonschema.ErrorKind
	detail string // describe(kind), computed when first needed
}

func (lf *leaf) describe() string {
	if lf.detail == "" {
		lf.detail = describe(lf.kind)
	}
	return lf.detail
}

// compare orders leaves by location, then by description.
func (lf *leaf) compare(o *leaf) int {
	return cmp.Or(CompareLocations(lf.loc, o.loc), strings.Compare(lf.describe(), o.describe()))
}

// CompareLocations orders instance locations element by element, array
// indexes numerically.
func CompareLocations(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] == b[i] {
			continue
		}
		x, errX := strconv.Atoi(a[i])
		y, errY := strconv.Atoi(b[i])
		if errX == nil && errY == nil {
			if c := cmp.Compare(x, y); c != 0 {
				return c
			}
		}
		return strings.Compare(a[i], b[i])
	}
	return cmp.Compare(len(a), len(b))
}

// describe says which keyword failed, quoting only the schema's limits,
// never the value.
func describe(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Type:
		return fmt.Sprintf("type: must be %s, not %s", strings.Join(k.Want, " or "), k.Got)
	case *kind.Enum:
		return "enum: the value is not one of the allowed values"
	case *kind.Const:
		return "const: the value is not the allowed value"
	case *kind.MinLength:
		return fmt.Sprintf("minLength: shorter than %d characters", k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("maxLength: longer than %d characters", k.Want)
	case *kind.MinItems:
		return fmt.Sprintf("minItems: fewer than %d items", k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("maxItems: more than %d items", k.Want)
	case *kind.MinProperties:
		return fmt.Sprintf("minProperties: fewer than %d properties", k.Want)
	case *kind.MaxProperties:
		return fmt.Sprintf("maxProperties: more than %d properties", k.Want)
	case *kind.Minimum:
		return "minimum: below " + ratString(k.Want)
	case *kind.Maximum:
		return "maximum: above " + ratString(k.Want)
	case *kind.ExclusiveMinimum:
		return "exclusiveMinimum: not above " + ratString(k.Want)
	case *kind.ExclusiveMaximum:
		return "exclusiveMaximum: not below " + ratString(k.Want)
	case *kind.MultipleOf:
		return "multipleOf: not a multiple of " + ratString(k.Want)
	case *kind.AdditionalProperties:
		return fmt.Sprintf("additionalProperties: %d properties the schema does not allow", len(k.Properties))
	case *kind.Pattern:
		return "pattern: the value does not match the schema's pattern"
	case *kind.FalseSchema:
		return "the schema allows no value here"
	case *kind.Not:
		return "not: the value matches a schema it must not match"
	case *kind.RefCycle:
		return "the input schema's references form a cycle here"
	case *kind.UniqueItems:
		return "uniqueItems: the array repeats an item"
	case *kind.OneOf:
		return "oneOf: the value does not match exactly one alternative"
	case *kind.AnyOf:
		return "anyOf: the value matches none of the alternatives"
	}
	kw := k.KeywordPath()
	if len(kw) == 0 {
		return "the value does not match the input schema"
	}
	return strings.Join(kw, "/") + ": the value does not match the input schema"
}

// ratString writes r as an integer when it is one, else as a decimal.
func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	return strings.TrimRight(r.FloatString(9), "0")
}
