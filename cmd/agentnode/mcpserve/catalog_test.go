package mcpserve

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/pkginstall"
	"github.com/agentnode/agentnode/kernel/home"
)

// writePackage writes a package directory with manifest text and an
// executable bin/tool, and returns its path.
func writePackage(t testing.TB, manifestText string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "tool"), []byte("#!/bin/sh\necho '{\"ok\":true,\"result\":1}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agentnode.yaml"), []byte(manifestText), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func install(t testing.TB, homeDir, manifestText string) {
	t.Helper()
	if _, err := pkginstall.Open(home.PackagesDir(homeDir)).Install(writePackage(t, manifestText), nil); err != nil {
		t.Fatalf("install: %v", err)
	}
}

const perms = `permissions:
  network: {level: none}
  filesystem: {level: none}
  code_execution: {level: none}
`

func toolpack(id, tools string) string {
	return `manifest_version: "0.2"
package_id: ` + id + `
package_type: toolpack
name: Test
publisher: test
version: 1.0.0
summary: Test package
runtime: exec
capabilities:
  tools:
` + tools + perms
}

const agentPkg = `manifest_version: "0.2"
package_id: some-agent
package_type: agent
name: Agent
publisher: test
version: 2.0.0
summary: An agent
runtime: exec
agent:
  entrypoint: bin/tool
capabilities:
  tools:
    - {name: go, description: Go, entrypoint: bin/tool, input_schema: {type: object}}
` + perms

const mcpPkg = `manifest_version: "0.2"
package_id: some-mcp
package_type: mcp_server
name: MCP
publisher: test
version: 3.0.0
summary: An MCP server
runtime: mcp
mcp_server:
  command: [/pack/bin/tool]
  install: {manager: npm, package: some-mcp, version: 3.0.0}
capabilities:
  tools:
    - {name: srv, description: Srv, entrypoint: srv, input_schema: {type: object}}
` + perms

func TestScan(t *testing.T) {
	h := t.TempDir()
	if c, err := Scan(h); err != nil || len(c.Tools) != 0 || len(c.Skipped) != 0 {
		t.Fatalf("empty home: %+v, %v", c, err)
	}
	install(t, h, toolpack("alpha-pack", `    - name: echo
      description: Echo it
      entrypoint: bin/tool
      action_type: read
      input_schema: {type: object, properties: {x: {type: integer}}, required: [x]}
      output_schema: {type: object}
    - name: untyped.v2
      description: No type keyword
      entrypoint: bin/tool
      input_schema: {properties: {y: {type: string}}}
      output_schema: {type: array}
    - name: scalar
      description: Takes a string
      entrypoint: bin/tool
      input_schema: {type: string}
`))
	install(t, h, agentPkg)
	install(t, h, mcpPkg)
	// runtime: python tools are exposed like exec ones.
	install(t, h, strings.Replace(toolpack("py-pack", `    - {name: count, description: Count, entrypoint: "py_pack.tool:count", input_schema: {type: object}}
`), "runtime: exec", "runtime: python", 1))

	c, err := Scan(h)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tools) != 4 {
		t.Fatalf("tools: %+v", c.Tools)
	}
	echo, untyped, py, srv := c.Tools[0], c.Tools[1], c.Tools[2], c.Tools[3]
	if py.Name != "py-pack__count" || py.Package != "py-pack" || py.Tool != "count" {
		t.Fatalf("python tool: %+v", py)
	}
	// A preinstalled, pinned MCP server's declared tools are exposed like
	// a toolpack's.
	if srv.Name != "some-mcp__srv" || srv.Package != "some-mcp" || srv.Tool != "srv" || srv.Version != "3.0.0" {
		t.Fatalf("mcp server tool: %+v", srv)
	}
	if echo.Name != "alpha-pack__echo" || echo.Package != "alpha-pack" || echo.Tool != "echo" ||
		echo.Version != "1.0.0" || echo.Description != "Echo it" || echo.ActionType != "read" {
		t.Fatalf("echo: %+v", echo)
	}
	var in map[string]any
	if err := json.Unmarshal(echo.InputSchema, &in); err != nil || in["type"] != "object" || in["required"] == nil {
		t.Fatalf("echo input schema %s (%v)", echo.InputSchema, err)
	}
	if echo.OutputSchema == nil {
		t.Fatal("echo: object output_schema dropped")
	}
	if untyped.Name != "alpha-pack__untyped.v2" || untyped.OutputSchema != nil {
		t.Fatalf("untyped: %+v", untyped)
	}
	in = nil
	if err := json.Unmarshal(untyped.InputSchema, &in); err != nil || in["type"] != "object" || in["properties"] == nil {
		t.Fatalf("untyped input schema %s (%v)", untyped.InputSchema, err)
	}

	why := map[string]Skipped{}
	for _, s := range c.Skipped {
		why[s.Package+"/"+s.Tool] = s
	}
	if s := why["alpha-pack/scalar"]; !strings.Contains(s.Reason, `type "string"`) {
		t.Errorf("scalar tool: %+v", s)
	}
	if s := why["some-agent/"]; s.PackageType != "agent" || !strings.Contains(s.Reason, "not exposed") {
		t.Errorf("agent: %+v", s)
	}
	if len(c.Skipped) != 2 {
		t.Errorf("skipped: %+v", c.Skipped)
	}
}

// A package whose metadata is corrupt is reported, not exposed, and does
// not hide the others.
func TestScanUnreadablePackage(t *testing.T) {
	h := t.TempDir()
	install(t, h, toolpack("good-pack", "    - {name: a, description: A, entrypoint: bin/tool, input_schema: {type: object}}\n"))
	install(t, h, toolpack("bad-pack", "    - {name: b, description: B, entrypoint: bin/tool, input_schema: {type: object}}\n"))
	meta := filepath.Join(home.PackagesDir(h), "bad-pack", "meta.json")
	if err := os.Chmod(filepath.Dir(meta), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(meta, 0o644)
	if err := os.WriteFile(meta, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Scan(h)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tools) != 1 || c.Tools[0].Name != "good-pack__a" {
		t.Fatalf("tools: %+v", c.Tools)
	}
	if len(c.Problems) != 1 || !strings.Contains(c.Problems[0], "bad-pack") {
		t.Fatalf("problems: %q", c.Problems)
	}
}

// The mapping is injective and always a valid MCP name, for every package
// id and tool name the manifest schema allows.
func TestToolNameMapping(t *testing.T) {
	const idChars = "abcdefghijklmnopqrstuvwxyz0123456789-"
	const toolFirst = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"
	const toolRest = toolFirst + ".-"
	r := rand.New(rand.NewPCG(1, 2))
	gen := func(first, rest string, min, max int) string {
		n := min + r.IntN(max-min+1)
		b := []byte{first[r.IntN(len(first))]}
		for len(b) < n {
			b = append(b, rest[r.IntN(len(rest))])
		}
		return string(b)
	}
	seen := map[string][2]string{}
	for i := 0; i < 20000; i++ {
		pkg := gen(idChars, idChars, 3, 60)
		tool := gen(toolFirst, toolRest, 1, 64)
		if i%3 == 0 {
			k := min(1+r.IntN(5), len(tool)) // underscores at the seam
			tool = strings.Repeat("_", k) + tool[k:]
		}
		name := ToolName(pkg, tool)
		if len(name) > MaxNameLength {
			t.Fatalf("%q is %d characters", name, len(name))
		}
		for _, c := range name {
			if !strings.ContainsRune(toolRest, c) {
				t.Fatalf("%q has %q", name, c)
			}
		}
		p, tl, ok := SplitToolName(name)
		if !ok || p != pkg || tl != tool {
			t.Fatalf("SplitToolName(%q) = %q %q %v, want %q %q", name, p, tl, ok, pkg, tool)
		}
		if prev, dup := seen[name]; dup && prev != [2]string{pkg, tool} {
			t.Fatalf("%q from both %v and %q/%q", name, prev, pkg, tool)
		}
		seen[name] = [2]string{pkg, tool}
	}
	for _, bad := range []string{"", "nopkg", "__tool", "pkg__"} {
		if _, _, ok := SplitToolName(bad); ok {
			t.Errorf("SplitToolName(%q) ok", bad)
		}
	}
}

func TestInputSchema(t *testing.T) {
	for in, want := range map[string]string{
		`{"type":"object"}`:                  `{"type":"object"}`,
		`{}`:                                 `{"type":"object"}`,
		` { } `:                              `{"type":"object"}`,
		`{"properties":{"a":{}}}`:            `{"type":"object","properties":{"a":{}}}`,
		` {  "required" : ["a"] } `:          `{"type":"object","required" : ["a"] }`,
		`{"type":"string"}`:                  "",
		`{"type":["object","null"]}`:         "",
		`[]`:                                 "",
		`{"type":"object","required":["x"]}`: `{"type":"object","required":["x"]}`,
	} {
		got, err := inputSchema(json.RawMessage(in))
		if want == "" {
			if err == nil {
				t.Errorf("%s: accepted as %s", in, got)
			}
			continue
		}
		if err != nil || string(got) != want {
			t.Errorf("%s: got %s, %v; want %s", in, got, err, want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: invalid JSON %s", in, got)
		}
	}
}

// `--package`: one package's tools under their own names; a package that
// is not installed, or has nothing to expose, is refused with why.
func TestScanPackage(t *testing.T) {
	h := t.TempDir()
	install(t, h, toolpack("alpha-pack", `    - {name: echo, description: Echo, entrypoint: bin/tool, input_schema: {type: object}}
    - {name: scalar, description: Scalar, entrypoint: bin/tool, input_schema: {type: string}}
`))
	install(t, h, toolpack("beta-pack", `    - {name: echo, description: Echo, entrypoint: bin/tool, input_schema: {type: object}}
`))
	install(t, h, toolpack("gamma-pack", `    - {name: scalar, description: Scalar, entrypoint: bin/tool, input_schema: {type: string}}
`))
	install(t, h, agentPkg)
	install(t, h, mcpPkg)

	c, err := ScanPackage(h, "alpha-pack")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tools) != 1 || c.Tools[0].Name != "echo" || c.Tools[0].Package != "alpha-pack" || c.Tools[0].Tool != "echo" {
		t.Fatalf("alpha-pack tools: %+v", c.Tools)
	}
	if len(c.Skipped) != 1 || c.Skipped[0].Tool != "scalar" {
		t.Fatalf("alpha-pack skipped: %+v", c.Skipped)
	}
	if c, err := ScanPackage(h, "some-mcp"); err != nil || len(c.Tools) != 1 || c.Tools[0].Name != "srv" {
		t.Fatalf("some-mcp: %+v, %v", c, err)
	}
	for _, bad := range []struct {
		pkg  string
		err  error
		says string
	}{
		{"no-such-pack", ErrUnknownPackage, "not installed"},
		{"Not A Package", ErrUnknownPackage, "not installed"},
		{"../alpha-pack", ErrUnknownPackage, "not installed"},
		{"some-agent", ErrNotExposable, "agent packages are not exposed"},
		{"gamma-pack", ErrNotExposable, `tool scalar: input_schema has type "string"`},
	} {
		_, err := ScanPackage(h, bad.pkg)
		if !errors.Is(err, bad.err) || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%s: %v, want %v saying %q", bad.pkg, err, bad.err, bad.says)
		}
	}
}
