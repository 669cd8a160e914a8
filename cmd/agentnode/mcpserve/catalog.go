package mcpserve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentnode/agentnode/cmd/agentnode/pkglist"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/kernel/validcache"
)

// Separator joins a package id and a tool name into an MCP tool name.
// Package ids are [a-z0-9-] (no underscore), so the first Separator in an
// MCP tool name always ends the package id.
const Separator = "__"

// MaxNameLength is the MCP limit on tool names.
const MaxNameLength = 128

// ToolName is the MCP name of tool in package: "<package>__<tool>".
func ToolName(pkg, tool string) string { return pkg + Separator + tool }

// SplitToolName is the inverse of ToolName.
func SplitToolName(name string) (pkg, tool string, ok bool) {
	pkg, tool, ok = strings.Cut(name, Separator)
	return pkg, tool, ok && pkg != "" && tool != ""
}

// Tool is one installed tool as serve exposes it.
type Tool struct {
	// Name is the MCP tool name, ToolName(Package, Tool).
	Name        string `json:"name"`
	Package     string `json:"package"`
	Version     string `json:"version"`
	Tool        string `json:"tool"`
	Description string `json:"description"`
	ActionType  string `json:"action_type,omitempty"`
	// InputSchema is the manifest's input_schema as written, with
	// "type":"object" added when it has no type (MCP requires it; a tool's
	// input is always a JSON object anyway).
	InputSchema json.RawMessage `json:"input_schema"`
	// OutputSchema is the manifest's output_schema when it describes an
	// object (MCP's structuredContent); nil otherwise.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// Skipped is an installed package (or one tool of it) that serve does not
// expose, and why.
type Skipped struct {
	Package     string `json:"package"`
	Version     string `json:"version,omitempty"`
	PackageType string `json:"package_type,omitempty"`
	// Tool is empty when the whole package is skipped.
	Tool string `json:"tool,omitempty"`
	// Code is the reason code `agentnode run` would refuse with, if any.
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason"`
}

// Catalog is what serve exposes right now.
type Catalog struct {
	Tools   []Tool    `json:"tools"`
	Skipped []Skipped `json:"skipped"`
	// Problems are packages the store could not read (each refused at run
	// time too); they are not exposed.
	Problems []string `json:"problems,omitempty"`
}

// Scan reads the package store of homeDir and returns the catalog. It
// decides nothing about trust or policy: every call still goes through the
// kernel, which re-checks everything. A missing store is an empty catalog.
func Scan(homeDir string) (*Catalog, error) {
	pkgs, listErr := pkglist.List(store.Open(home.PackagesDir(homeDir)).WithVerdicts(validcache.Open(home.VerdictsDir(homeDir))))
	c := &Catalog{Tools: []Tool{}, Skipped: []Skipped{}}
	if listErr != nil {
		// A joined error names single unreadable packages; anything else
		// is about the store directory itself.
		j, ok := listErr.(interface{ Unwrap() []error })
		if !ok {
			return nil, fmt.Errorf("list installed packages: %w", listErr)
		}
		for _, e := range j.Unwrap() {
			c.Problems = append(c.Problems, e.Error())
		}
	}
	for _, p := range pkgs {
		m := p.Manifest
		skip := Skipped{Package: p.ID, Version: p.Version, PackageType: m.PackageType}
		switch {
		case m.PackageType == manifest.TypeMCPServer:
			// Its declared tools, if the server is preinstalled and
			// pinned (the kernel checks again, from the lockfile, on
			// every call).
			if _, err := manifest.CheckMCPLaunch(m.MCP, p.Dir); err != nil {
				skip.Code = string(reason.CodeOf(err))
				skip.Reason = err.Error()
				c.Skipped = append(c.Skipped, skip)
				continue
			}
		case m.PackageType != manifest.TypeToolpack:
			skip.Reason = fmt.Sprintf("%s packages are not exposed over MCP (run them with `agentnode run`)", m.PackageType)
			c.Skipped = append(c.Skipped, skip)
			continue
		case m.Runtime != manifest.RuntimeExec && m.Runtime != manifest.RuntimePython:
			skip.Code = string(reason.RuntimeUnsupported)
			skip.Reason = fmt.Sprintf("runtime %q is not runnable yet", m.Runtime)
			c.Skipped = append(c.Skipped, skip)
			continue
		}
		for _, t := range m.Tools {
			name := ToolName(p.ID, t.Name)
			in, err := inputSchema(t.InputSchema)
			if err == nil && len(name) > MaxNameLength {
				err = fmt.Errorf("MCP name %q is longer than %d characters", name, MaxNameLength)
			}
			if err != nil {
				s := skip
				s.Tool, s.Reason = t.Name, err.Error()
				c.Skipped = append(c.Skipped, s)
				continue
			}
			c.Tools = append(c.Tools, Tool{
				Name:         name,
				Package:      p.ID,
				Version:      p.Version,
				Tool:         t.Name,
				Description:  t.Description,
				ActionType:   t.ActionType,
				InputSchema:  in,
				OutputSchema: objectSchema(t.OutputSchema),
			})
		}
	}
	return c, nil
}

// inputSchema returns the MCP inputSchema of a manifest input_schema: as
// written when its type is "object", with "type":"object" added when it has
// no type, and an error for any other type.
func inputSchema(raw json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, errors.New("input_schema is not a JSON object")
	}
	t, ok := m["type"]
	if !ok {
		if len(m) == 0 {
			return json.RawMessage(`{"type":"object"}`), nil
		}
		// Insert the key after the opening brace; the rest stays as written.
		b := bytes.TrimSpace(raw)
		out := append([]byte(`{"type":"object",`), bytes.TrimSpace(b[1:])...)
		return json.RawMessage(out), nil
	}
	var s string
	if json.Unmarshal(t, &s) != nil || s != "object" {
		return nil, fmt.Errorf("input_schema has type %s; MCP tools take a JSON object (type \"object\")", t)
	}
	return raw, nil
}

// objectSchema returns raw if it is a schema of type "object", else nil.
func objectSchema(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var m struct {
		Type json.RawMessage `json:"type"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	var s string
	if json.Unmarshal(m.Type, &s) != nil || s != "object" {
		return nil
	}
	return raw
}

// Why `--package` refuses to serve a package.
var (
	ErrUnknownPackage = errors.New("package is not installed")
	ErrNotExposable   = errors.New("package has no tool mcp serve can expose")
)

// Only is the catalog of one package as `mcp serve --package` serves it:
// its tools under their own names (a tool name is already a valid MCP name:
// [A-Za-z0-9_][A-Za-z0-9_.-]{0,63}), so agentnode stands in front of one
// server without renaming its tools; the skipped entries and problems are
// that package's only. A package that is not installed, or whose tools
// are all skipped, gives an empty Tools list; other packages' problems are
// left out.
func (c *Catalog) Only(pkg string) *Catalog {
	out := &Catalog{Tools: []Tool{}, Skipped: []Skipped{}}
	for _, t := range c.Tools {
		if t.Package == pkg {
			t.Name = t.Tool
			out.Tools = append(out.Tools, t)
		}
	}
	for _, s := range c.Skipped {
		if s.Package == pkg {
			out.Skipped = append(out.Skipped, s)
		}
	}
	return out
}

// ScanPackage is Scan for one package (Only), refused with
// ErrUnknownPackage, or ErrNotExposable saying why, when it has no tool to
// serve.
func ScanPackage(homeDir, pkg string) (*Catalog, error) {
	if _, err := store.Open(home.PackagesDir(homeDir)).WithVerdicts(validcache.Open(home.VerdictsDir(homeDir))).Get(pkg); err != nil {
		if errors.Is(err, store.ErrNotInstalled) || store.CheckID(pkg) != nil {
			return nil, fmt.Errorf("%q: %w (see `agentnode list`)", pkg, ErrUnknownPackage)
		}
		return nil, fmt.Errorf("%q: %w: %w", pkg, ErrNotExposable, err)
	}
	all, err := Scan(homeDir)
	if err != nil {
		return nil, err
	}
	c := all.Only(pkg)
	if len(c.Tools) > 0 {
		return c, nil
	}
	why := []string{}
	for _, s := range c.Skipped {
		w := s.Reason
		if s.Tool != "" {
			w = "tool " + s.Tool + ": " + w
		}
		if s.Code != "" {
			w += " [" + s.Code + "]"
		}
		why = append(why, w)
	}
	if len(why) == 0 {
		why = append(why, "it declares no tools")
	}
	return nil, fmt.Errorf("%q: %w: %s", pkg, ErrNotExposable, strings.Join(why, "; "))
}
