package schemacheck

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/sdk/guard"
)

func TestCheck(t *testing.T) {
	schema := []byte(`{"type":"object","required":["path"],"additionalProperties":false,
		"properties":{"path":{"type":"string","maxLength":8},"n":{"type":"integer","minimum":1},
		"tags":{"type":"array","items":{"enum":["a","b"]}}}}`)
	for _, tc := range []struct {
		name, input string
		want        []string // "location: detail" substrings, in order
	}{
		{"valid", `{"path":"a.txt","n":2,"tags":["a"]}`, nil},
		{"missing required", `{"n":2}`, []string{"path: required: the property is missing"}},
		{"type", `{"path":5}`, []string{"path: type: must be string, not number"}},
		{"several, ordered by location", `{"path":"0123456789","n":0,"tags":["a","zz","a","yy"]}`,
			[]string{"n: minimum: below 1", "path: maxLength: longer than 8", "tags/1: enum", "tags/3: enum"}},
		{"additional property", `{"path":"p","secret-key-AKIA":1}`, []string{": additionalProperties: 1 properties"}},
		{"not JSON", `{"path":`, []string{": the input is not valid JSON"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Check(schema, []byte(tc.input))
			if c == nil || c.Problem != "" {
				t.Fatalf("Check = %+v", c)
			}
			if len(c.Violations) != len(tc.want) {
				t.Fatalf("violations %+v, want %d", c.Violations, len(tc.want))
			}
			for i, v := range c.Violations {
				got := strings.Join(v.Location, "/") + ": " + v.Detail
				if !strings.Contains(got, tc.want[i]) {
					t.Errorf("violation %d = %q, want %q", i, got, tc.want[i])
				}
				// Never an input value (the additional property's name is
				// in the location only, never in a detail).
				for _, secret := range []string{"0123456789", "zz", "yy", "AKIA"} {
					if strings.Contains(v.Detail, secret) {
						t.Errorf("detail %q quotes the input", v.Detail)
					}
				}
			}
		})
	}
}

func TestSchemaProblems(t *testing.T) {
	for schema, want := range map[string]string{
		`{"type":`:                      "not valid JSON",
		`"a string"`:                    "neither an object nor a boolean",
		`{"type":12}`:                   "does not compile",
		`{"$ref":"file:///etc/passwd"}`: "does not compile",
		strings.Repeat(`{"items":`, guard.MaxSchemaDepth+1) + "true" + strings.Repeat("}", guard.MaxSchemaDepth+1): "nested deeper",
	} {
		c := Check([]byte(schema), []byte(`{}`))
		if c == nil || !strings.Contains(c.Problem, want) || len(c.Violations) != 0 {
			t.Errorf("schema %.40q: %+v, want problem %q", schema, c, want)
		}
	}
	for _, none := range []string{"", " ", "null"} {
		if c := Check([]byte(none), []byte(`{}`)); c != nil {
			t.Errorf("no schema %q: %+v, want nil", none, c)
		}
	}
}

// Leaves beyond guard.MaxSchemaViolations are counted, and the kept ones
// are the first by location (indexes numerically).
func TestCapAndOrder(t *testing.T) {
	items := make([]string, 30)
	for i := range items {
		items[i] = "1"
	}
	c := Check([]byte(`{"type":"array","items":{"type":"string"}}`), []byte("["+strings.Join(items, ",")+"]"))
	if len(c.Violations) != guard.MaxSchemaViolations || c.Omitted != 30-guard.MaxSchemaViolations {
		t.Fatalf("%d violations, %d omitted", len(c.Violations), c.Omitted)
	}
	for i, v := range c.Violations {
		if want := fmt.Sprint(i); len(v.Location) != 1 || v.Location[0] != want {
			t.Fatalf("violation %d at %v, want [%s]", i, v.Location, want)
		}
	}
}

func TestCheckerKeepsCompiledSchemas(t *testing.T) {
	c := NewChecker(2)
	a := []byte(`{"type":"object"}`)
	c.Check(a, []byte(`{}`))
	c.Check(a, []byte(`{}`))
	if len(c.m) != 1 {
		t.Fatalf("%d schemas kept, want 1", len(c.m))
	}
	c.Check([]byte(`{"type":"array"}`), []byte(`[]`))
	c.Check([]byte(`true`), []byte(`[]`)) // full: emptied first
	if len(c.m) != 1 {
		t.Fatalf("%d schemas kept, want 1", len(c.m))
	}
}
