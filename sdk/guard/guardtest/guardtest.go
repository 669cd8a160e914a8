// Package guardtest runs a guard.Inspector through the real go-plugin gRPC
// path in memory, and checks an inspector against golden cases kept in a YAML
// or JSON file, so inspector authors can test without building a binary.
//
// A case file holds a list of cases under "cases":
//
//	cases:
//	  - name: rm -rf is denied
//	    package_id: shell-tools
//	    version: 1.0.0
//	    tool: run
//	    action_types: [execute]
//	    permissions: {network_level: none, filesystem_level: none, code_execution_level: shell}
//	    input: {command: "rm -rf /"}     # any value, sent as JSON
//	    env: {ci: true}
//	    trust_level: verified
//	    want: deny
//	    want_reason: recursive delete    # optional: a substring of one reason
//
// input is any YAML value and is sent as its JSON encoding; input_json is sent
// byte for byte instead (use it for malformed input). input_schema and
// input_schema_json work the same way for the tool's input schema; the
// request then carries the host's validation of the input against it
// (SchemaCheck, made by sdk/guard/schemacheck as the kernel makes it).
// Unknown keys are errors. A JSON file with the same structure works too.
package guardtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/agentnode/agentnode/sdk/guard"
	"github.com/agentnode/agentnode/sdk/guard/schemacheck"
	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/plugin/plugintest"
)

// Connect serves impl over in-memory gRPC and returns the host-side client.
// The connection and the server are closed when the test ends.
func Connect(t testing.TB, info plugin.Info, impl guard.Inspector) *guard.Client {
	t.Helper()
	c, _ := plugintest.Connect[*guard.Client](t, plugin.KindGuard, &guard.GRPCPlugin{Impl: impl, Info: info})
	return c
}

// Permissions is the permissions block of a Case.
type Permissions struct {
	NetworkLevel       string   `yaml:"network_level"`
	AllowedDomains     []string `yaml:"allowed_domains"`
	FilesystemLevel    string   `yaml:"filesystem_level"`
	CodeExecutionLevel string   `yaml:"code_execution_level"`
}

// Env is the env block of a Case.
type Env struct {
	CI             bool `yaml:"ci"`
	Interactive    bool `yaml:"interactive"`
	SecretsPresent bool `yaml:"secrets_present"`
	Root           bool `yaml:"root"`
}

// Case is one golden case: a request and the verdict it must get.
type Case struct {
	Name            string        `yaml:"name"`
	PackageID       string        `yaml:"package_id"`
	Version         string        `yaml:"version"`
	Tool            string        `yaml:"tool"`
	ActionTypes     []string      `yaml:"action_types"`
	Permissions     Permissions   `yaml:"permissions"`
	Input           any           `yaml:"input"`
	InputJSON       *string       `yaml:"input_json"`
	InputSchema     any           `yaml:"input_schema"`
	InputSchemaJSON *string       `yaml:"input_schema_json"`
	Env             Env           `yaml:"env"`
	TrustLevel      string        `yaml:"trust_level"`
	Want            guard.Verdict `yaml:"want"`
	WantReason      string        `yaml:"want_reason"`
}

type caseFile struct {
	Cases []Case `yaml:"cases"`
}

// LoadCases reads and validates a case file. Every case needs a unique
// non-empty name and a valid want verdict; the file needs at least one case.
func LoadCases(path string) ([]Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("guardtest: %w", err)
	}
	return ParseCases(data)
}

// ParseCases parses and validates the contents of a case file (YAML or JSON).
func ParseCases(data []byte) ([]Case, error) {
	var f caseFile
	if err := yaml.UnmarshalWithOptions(data, &f, yaml.DisallowUnknownField()); err != nil {
		return nil, fmt.Errorf("guardtest: parse cases: %w", err)
	}
	if len(f.Cases) == 0 {
		return nil, errors.New("guardtest: no cases")
	}
	seen := make(map[string]bool, len(f.Cases))
	for i, c := range f.Cases {
		if c.Name == "" {
			return nil, fmt.Errorf("guardtest: case %d has no name", i+1)
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("guardtest: duplicate case name %q", c.Name)
		}
		seen[c.Name] = true
		if !c.Want.Valid() {
			return nil, fmt.Errorf("guardtest: case %q: want %q is not a verdict (allow|prompt|deny|abstain)", c.Name, c.Want)
		}
		if _, err := c.Request(); err != nil {
			return nil, err
		}
	}
	return f.Cases, nil
}

func jsonField(name, field string, value any, raw *string) ([]byte, error) {
	switch {
	case value != nil && raw != nil:
		return nil, fmt.Errorf("guardtest: case %q: set %s or %s_json, not both", name, field, field)
	case raw != nil:
		return []byte(*raw), nil
	case value != nil:
		b, err := json.Marshal(value)
		if err != nil {
			return nil, fmt.Errorf("guardtest: case %q: %s as JSON: %w", name, field, err)
		}
		return b, nil
	}
	return nil, nil
}

// Request builds the InspectRequest of the case.
func (c *Case) Request() (*guard.InspectRequest, error) {
	in, err := jsonField(c.Name, "input", c.Input, c.InputJSON)
	if err != nil {
		return nil, err
	}
	schema, err := jsonField(c.Name, "input_schema", c.InputSchema, c.InputSchemaJSON)
	if err != nil {
		return nil, err
	}
	return &guard.InspectRequest{
		PackageID:   c.PackageID,
		Version:     c.Version,
		Tool:        c.Tool,
		ActionTypes: c.ActionTypes,
		Permissions: guard.Permissions{
			NetworkLevel:       c.Permissions.NetworkLevel,
			AllowedDomains:     c.Permissions.AllowedDomains,
			FilesystemLevel:    c.Permissions.FilesystemLevel,
			CodeExecutionLevel: c.Permissions.CodeExecutionLevel,
		},
		InputJSON:       in,
		InputSchemaJSON: schema,
		Env: guard.Env{
			CI:             c.Env.CI,
			Interactive:    c.Env.Interactive,
			SecretsPresent: c.Env.SecretsPresent,
			Root:           c.Env.Root,
		},
		TrustLevel: c.TrustLevel,
		// What the host sends: its validation of the input against the
		// schema (nil without a schema).
		SchemaCheck: schemacheck.Check(schema, in),
	}, nil
}

// Check runs one case against insp and returns an error describing any
// mismatch (wrong verdict, missing reason, or an error from the inspector).
func Check(ctx context.Context, insp guard.Inspector, c Case) error {
	req, err := c.Request()
	if err != nil {
		return err
	}
	resp, err := insp.Inspect(ctx, req)
	if err != nil {
		return fmt.Errorf("case %q: inspect: %w", c.Name, err)
	}
	if resp == nil {
		return fmt.Errorf("case %q: inspector returned no response", c.Name)
	}
	if resp.Verdict != c.Want {
		return fmt.Errorf("case %q: verdict %q, want %q (reasons %q)", c.Name, resp.Verdict, c.Want, resp.Reasons)
	}
	if c.WantReason != "" {
		for _, r := range resp.Reasons {
			if strings.Contains(r, c.WantReason) {
				return nil
			}
		}
		return fmt.Errorf("case %q: no reason contains %q (reasons %q)", c.Name, c.WantReason, resp.Reasons)
	}
	return nil
}

// RunCases loads the case file at path and runs every case as a subtest
// against insp, usually the *guard.Client returned by Connect.
func RunCases(t *testing.T, insp guard.Inspector, path string) {
	t.Helper()
	cases, err := LoadCases(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if err := Check(ctx, insp, c); err != nil {
				t.Error(err)
			}
		})
	}
}
