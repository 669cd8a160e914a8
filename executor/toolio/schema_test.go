package toolio

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentnode/agentnode/specs"
)

const (
	requestSchema  = "schema/toolio-request.schema.json"
	responseSchema = "schema/toolio-response.schema.json"
)

var (
	schemasOnce sync.Once
	schemas     map[string]*jsonschema.Schema
	schemasErr  error
)

// loadSchemas compiles the published schemas from the embedded specs folder,
// so the tests judge exactly the files users read.
func loadSchemas(tb testing.TB) map[string]*jsonschema.Schema {
	tb.Helper()
	schemasOnce.Do(func() {
		c := jsonschema.NewCompiler()
		schemas = map[string]*jsonschema.Schema{}
		for _, name := range []string{requestSchema, responseSchema} {
			b, err := specs.Schemas.ReadFile(name)
			if err != nil {
				schemasErr = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				schemasErr = err
				return
			}
			if err := c.AddResource(name, doc); err != nil {
				schemasErr = err
				return
			}
			s, err := c.Compile(name)
			if err != nil {
				schemasErr = err
				return
			}
			schemas[name] = s
		}
	})
	if schemasErr != nil {
		tb.Fatalf("load schemas: %v", schemasErr)
	}
	return schemas
}

// schemaAccepts reports whether doc is JSON that validates against schema.
func schemaAccepts(tb testing.TB, schema string, doc []byte) bool {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return false
	}
	return loadSchemas(tb)[schema].Validate(v) == nil
}

func TestResponseSchemaAgreesWithDecoder(t *testing.T) {
	for _, c := range decodeCases {
		if c.goOnly {
			continue
		}
		if got := schemaAccepts(t, responseSchema, []byte(c.in)); got != c.ok {
			t.Errorf("%s: schema accepts %q = %v, decoder = %v", c.name, c.in, got, c.ok)
		}
	}
}

func TestRequestSchema(t *testing.T) {
	for _, c := range []struct {
		tool, input string
	}{
		{"search", `{}`},
		{"x", `{"nested":{"a":[1,null,"s"]}}`},
		{"日本", "{\n \"a\": 1\n}"},
	} {
		b, err := EncodeRequest(c.tool, json.RawMessage(c.input))
		if err != nil {
			t.Fatal(err)
		}
		if !schemaAccepts(t, requestSchema, b) {
			t.Errorf("schema refuses encoded request %q", b)
		}
		if bytes.Count(b, []byte("\n")) != 1 || !bytes.HasSuffix(b, []byte("\n")) {
			t.Errorf("request %q is not one line", b)
		}
	}
	for _, doc := range []string{
		`{"tool":"t"}`,
		`{"input":{}}`,
		`{"tool":"","input":{}}`,
		`{"tool":"a\nb","input":{}}`,
		`{"tool":"t","input":[]}`,
		`{"tool":"t","input":{},"extra":1}`,
		`{"tool":1,"input":{}}`,
	} {
		if schemaAccepts(t, requestSchema, []byte(doc)) {
			t.Errorf("schema accepts invalid request %s", doc)
		}
	}
	// The schema's tool-name rule and EncodeRequest's agree.
	for _, name := range []string{"ok", "a b", "a\tb", "a\u0085b", "a\u007fb", "a\u00a0b", strings.Repeat("n", 300)} {
		_, err := EncodeRequest(name, json.RawMessage(`{}`))
		doc, _ := json.Marshal(map[string]any{"tool": name, "input": map[string]any{}})
		if got := schemaAccepts(t, requestSchema, doc); got != (err == nil) {
			t.Errorf("tool %q: schema accepts = %v, EncodeRequest err = %v", name, got, err)
		}
	}
}
