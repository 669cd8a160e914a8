package audit

import (
	"bytes"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentnode/agentnode/specs"
)

// SchemaFile is the record schema's path inside specs.Schemas.
const SchemaFile = "schema/audit-record.schema.json"

const schemaURL = "https://github.com/agentnode/agentnode/specs/schema/audit-record.schema.json"

var (
	schemaOnce sync.Once
	schema     *jsonschema.Schema
	schemaErr  error
)

// recordSchema compiles specs/schema/audit-record.schema.json once, with
// format assertions on (ts must be an RFC 3339 date-time).
func recordSchema() (*jsonschema.Schema, error) {
	schemaOnce.Do(func() {
		data, err := specs.Schemas.ReadFile(SchemaFile)
		if err != nil {
			schemaErr = fmt.Errorf("load audit record schema: %w", err)
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			schemaErr = fmt.Errorf("parse %s: %w", SchemaFile, err)
			return
		}
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		if err := c.AddResource(schemaURL, doc); err != nil {
			schemaErr = fmt.Errorf("add %s: %w", SchemaFile, err)
			return
		}
		schema, schemaErr = c.Compile(schemaURL)
		if schemaErr != nil {
			schemaErr = fmt.Errorf("compile %s: %w", SchemaFile, schemaErr)
		}
	})
	return schema, schemaErr
}

// schemaViolation is a record that is JSON but not valid against the schema.
type schemaViolation struct{ err error }

// Error is the validator's message on one line: "at '/decision': value
// must be one of ...; at ...".
func (e *schemaViolation) Error() string {
	lines := strings.Split(e.err.Error(), "\n")
	if len(lines) > 1 {
		lines = lines[1:] // "jsonschema validation failed with '<schema url>#'"
	}
	for i, l := range lines {
		lines[i] = strings.TrimLeft(strings.TrimSpace(l), "- ")
	}
	return strings.Join(lines, "; ")
}
func (e *schemaViolation) Unwrap() error { return e.err }

// validateSchema validates one JSON line against the record schema. A
// violation is a *schemaViolation; other errors are about the JSON itself or
// the schema.
func validateSchema(line []byte) error {
	sch, err := recordSchema()
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	if err := sch.Validate(v); err != nil {
		return &schemaViolation{err: err}
	}
	return nil
}
