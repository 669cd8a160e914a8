package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/sdk/editdist"
	"github.com/agentnode/agentnode/specs"
)

// SchemaFile is the manifest's JSON Schema inside specs.Schemas.
const SchemaFile = "schema/agentnode.schema.json"

// noLoader refuses every external reference: schemas are compiled from
// memory only, so a $ref in a package's input_schema can never read a local
// file or reach the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema references are not allowed: %s", url)
}

// MaxSchemaDepth bounds the nesting of a schema CompileSchema compiles
// (the compiler recurses once per level).
const MaxSchemaDepth = 64

// CompileSchema compiles doc, a JSON Schema document (JSON text), with
// draft 2020-12 as the default dialect and every external $ref refused.
// Regular expressions in it use Go's RE2 syntax. Use it for tools'
// input_schema and output_schema. A schema nested deeper than
// MaxSchemaDepth is refused (bounded.ErrTooDeep) before it is parsed.
func CompileSchema(doc []byte) (*jsonschema.Schema, error) {
	if err := bounded.JSONDepth(doc, MaxSchemaDepth); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return compileAt("mem:///schema.json", doc)
}

// compileAt compiles doc as the resource url; errors name locations in it.
func compileAt(url string, doc []byte) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(url, v); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// schemaID is the $id of the manifest schema.
const schemaID = "https://agentnode.dev/schema/agentnode.schema.json"

// patternHints replace "does not match pattern <regexp>" by what the
// pattern means, keyed by the schema location of the pattern.
var patternHints = map[string]string{
	"/$defs/semver":               "is not a semantic version (MAJOR.MINOR.PATCH, semver.org)",
	"/$defs/packageId":            "is not a package id (3 to 60 characters of a-z, 0-9 and -)",
	"/$defs/domain":               "is not an exact lower-case DNS name (no scheme, port, path, wildcard or IP address)",
	"/$defs/envName":              "is not an environment variable name",
	"/$defs/httpURL":              "is not an http(s) URL",
	"/$defs/tool/properties/name": "is not a tool name (1 to 64 of A-Z a-z 0-9 _ . -, starting with a letter, digit or _)",
}

// compileProblems reports why a tool's schema (raw, at field) does not
// compile, naming the offending keyword when the metaschema rejected it.
func compileProblems(field string, raw []byte, err error) []Problem {
	const prefix = "not a valid JSON Schema: "
	var se *jsonschema.SchemaValidationError
	if !errors.As(err, &se) {
		return []Problem{{Field: field, Msg: prefix + strings.Join(strings.Fields(err.Error()), " ")}}
	}
	doc, derr := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if derr != nil {
		return []Problem{{Field: field, Msg: prefix + derr.Error()}}
	}
	out := schemaProblems(se.Err, doc)
	for i, p := range out {
		switch {
		case p.Field == "":
			out[i].Field = field
		case strings.HasPrefix(p.Field, "["):
			out[i].Field = field + p.Field
		default:
			out[i].Field = field + "." + p.Field
		}
		out[i].Msg = prefix + p.Msg
	}
	return out
}

var printer = message.NewPrinter(language.English)

var manifestSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	data, err := fs.ReadFile(specs.Schemas, SchemaFile)
	if err != nil {
		return nil, fmt.Errorf("manifest schema: %w", err)
	}
	s, err := compileAt(schemaID, data)
	if err != nil {
		return nil, fmt.Errorf("manifest schema %s: %w", SchemaFile, err)
	}
	return s, nil
})

// schemaProblems turns a validation error into one problem per failed
// leaf, each naming its field.
func schemaProblems(err error, doc any) []Problem {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []Problem{{Msg: err.Error()}}
	}
	var out []Problem
	var visit func(e *jsonschema.ValidationError)
	visit = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				visit(c)
			}
			return
		}
		p := instancePath(e.InstanceLocation, doc)
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			for _, m := range k.Missing {
				out = append(out, Problem{Field: string(p.key(m)), Msg: "missing"})
			}
		case *kind.AdditionalProperties:
			for _, f := range k.Properties {
				msg := "unknown field"
				if s := editdist.Nearest(f, knownFields(e.SchemaURL)); s != "" {
					msg += fmt.Sprintf(" (did you mean %s?)", p.key(s))
				}
				out = append(out, Problem{Field: string(p.key(f)), Msg: msg})
			}
		case *kind.Pattern:
			msg := e.ErrorKind.LocalizedString(printer)
			for def, hint := range patternHints {
				if e.SchemaURL == schemaID+"#"+def {
					msg = fmt.Sprintf("%q %s", k.Got, hint)
				}
			}
			out = append(out, Problem{Field: string(p), Msg: msg})
		case *kind.Type:
			msg := fmt.Sprintf("must be %s, not %s", strings.Join(k.Want, " or "), k.Got)
			if slices.Equal(k.Want, []string{"string"}) && (k.Got == "number" || k.Got == "integer" || k.Got == "boolean") {
				msg += " (YAML read it as a " + k.Got + "; put the value in quotes)"
			}
			out = append(out, Problem{Field: string(p), Msg: msg})
		case *kind.FalseSchema:
			out = append(out, Problem{Field: string(p), Msg: "not allowed"})
		default:
			out = append(out, Problem{Field: string(p), Msg: e.ErrorKind.LocalizedString(printer)})
		}
		if rule := typeRule(e.SchemaURL); rule != "" {
			out[len(out)-1].Msg += " (" + rule + ")"
		}
	}
	visit(ve)
	return out
}

var typeRuleRe = regexp.MustCompile(`^` + regexp.QuoteMeta(schemaID) + `#/allOf/(\d+)/then(/|$)`)

// typeRule returns the description of the package-type rule (the schema's
// top-level allOf) that the keyword at schemaURL belongs to, or "".
func typeRule(schemaURL string) string {
	sm := typeRuleRe.FindStringSubmatch(schemaURL)
	if sm == nil {
		return ""
	}
	i, _ := strconv.Atoi(sm[1])
	root, _ := schemaDoc().(map[string]any)
	rules, _ := root["allOf"].([]any)
	if i >= len(rules) {
		return ""
	}
	rule, _ := rules[i].(map[string]any)
	desc, _ := rule["description"].(string)
	return desc
}

// schemaDoc is the manifest schema as a generic JSON value.
var schemaDoc = sync.OnceValue(func() any {
	data, err := fs.ReadFile(specs.Schemas, SchemaFile)
	if err != nil {
		return nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil
	}
	return v
})

// knownFields lists the properties of the manifest schema object at
// schemaURL (schemaID#/json/pointer); nil for other schemas.
func knownFields(schemaURL string) []string {
	ptr, ok := strings.CutPrefix(schemaURL, schemaID+"#")
	if !ok {
		return nil
	}
	v := schemaDoc()
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = obj[tok]
	}
	obj, _ := v.(map[string]any)
	props, _ := obj["properties"].(map[string]any)
	var names []string
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
