// Package manifest loads and checks a package's agentnode.yaml, a superset
// of AgentNode's ANP 0.1 and 0.2 manifests (specs/manifest.md). ANP 0.2's
// defaults are applied (runtime python, permissions none), and a python
// tool without an entrypoint gets the package-level one (Tool.FromPackage).
//
// Load is strict and fails closed: the YAML must be one document without
// duplicate keys, anchors or aliases; it must validate against
// specs/schema/agentnode.schema.json (unknown fields are errors, so typos
// are caught), including the package-type rules (toolpack, agent and
// mcp_server each with their runtimes and required sections); and it must
// pass the checks a schema cannot express (strict semver, unique tool
// names, input schemas that compile, for runtime exec entrypoints,
// agent.entrypoint too, that are executable regular files inside the
// package, for runtime python that they are module.path[:function]).
// Every problem is reported with the file and the dotted path of the field.
//
// It is in the trusted core because a decision reads the installed package's
// manifest (its tools, permissions, runtime) before every run.
package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/validcache"
)

// FileName is the manifest's name inside a package directory.
const FileName = "agentnode.yaml"

// MaxSize bounds the manifest file.
const MaxSize = 1 << 20

// Package types.
const (
	TypeToolpack  = "toolpack"
	TypeAgent     = "agent"
	TypeMCPServer = "mcp_server"
)

// Runtimes.
const (
	RuntimeExec   = "exec"
	RuntimePython = "python"
	RuntimeMCP    = "mcp"
)

// LevelNone is the lowest level of each permission: network, filesystem
// and code_execution.
const LevelNone = "none"

// Network permission levels.
const (
	NetworkNone         = LevelNone
	NetworkRestricted   = "restricted"
	NetworkUnrestricted = "unrestricted"
)

// Manifest is a loaded, checked agentnode.yaml. String fields hold the
// values as written (enums are checked by Load); optional sections are nil
// when absent.
type Manifest struct {
	ManifestVersion string   `json:"manifest_version"`
	PackageID       string   `json:"package_id"`
	PackageType     string   `json:"package_type"` // toolpack | agent | mcp_server
	Name            string   `json:"name"`
	Publisher       string   `json:"publisher"`
	Version         string   `json:"version"` // strict semver
	Summary         string   `json:"summary"`
	Description     string   `json:"description,omitempty"`
	License         string   `json:"license,omitempty"`
	Runtime         string   `json:"runtime"` // exec | python | mcp
	Tags            []string `json:"tags,omitempty"`
	// Entrypoint is the package-level entrypoint of ANP 0.1 (runtime
	// python: "module.path" meaning its run, or "module.path:function"),
	// empty if absent. A tool without its own entrypoint uses it.
	Entrypoint string `json:"entrypoint,omitempty"`

	Tools       []Tool      `json:"tools"` // capabilities.tools, at least one
	Permissions Permissions `json:"permissions"`

	// Agent is the ANP agent section as written (JSON), nil if absent.
	Agent json.RawMessage `json:"agent,omitempty"`
	// AgentEntrypoint is agent.entrypoint (required for package_type
	// agent): a path inside the package for runtime exec, module:function
	// for runtime python.
	AgentEntrypoint string `json:"-"`
	// ToolAccess, LLMAccess and Limits come from the top level or from the
	// agent section (never both: Load refuses that).
	ToolAccess      *ToolAccess      `json:"tool_access,omitempty"`
	LLMAccess       *LLMAccess       `json:"llm_access,omitempty"`
	Limits          *Limits          `json:"limits,omitempty"`
	Connector       *Connector       `json:"connector,omitempty"`
	MCP             *MCP             `json:"mcp_server,omitempty"`
	EnvRequirements []EnvRequirement `json:"env_requirements,omitempty"`

	// Raw is the whole manifest converted to JSON, including the ANP fields
	// agentnode keeps but does not interpret.
	Raw json.RawMessage `json:"-"`
}

// Tool is one entry of capabilities.tools.
type Tool struct {
	Name         string          `json:"name"`
	CapabilityID string          `json:"capability_id,omitempty"`
	Description  string          `json:"description"`
	Entrypoint   string          `json:"entrypoint"`              // exec: a clean relative path inside the package
	InputSchema  json.RawMessage `json:"input_schema"`            // a JSON Schema (object), compiles
	OutputSchema json.RawMessage `json:"output_schema,omitempty"` // nil if absent
	ActionType   string          `json:"action_type,omitempty"`   // empty if not declared
	// FromPackage: Entrypoint was taken from the package-level
	// entrypoint because the tool declares none (the Python shim's
	// --package-entrypoint).
	FromPackage bool `json:"-"`
}

// Permissions is what a package declares it needs.
type Permissions struct {
	Network       NetworkPermission `json:"network"`
	Filesystem    Level             `json:"filesystem"`
	CodeExecution Level             `json:"code_execution"`
	DataAccess    *Level            `json:"data_access,omitempty"`
	UserApproval  *UserApproval     `json:"user_approval,omitempty"`
	// ExternalIntegrations is ANP's free-form list, kept as written.
	ExternalIntegrations []string `json:"external_integrations,omitempty"`
}

// NetworkPermission is permissions.network.
type NetworkPermission struct {
	Level          string   `json:"level"` // none | restricted | unrestricted
	AllowedDomains []string `json:"allowed_domains,omitempty"`
}

// Level is a permission with only a level.
type Level struct {
	Level string `json:"level"`
}

// UserApproval is permissions.user_approval.
type UserApproval struct {
	Required string `json:"required"`
}

// ToolAccess lists the packages an agent may call.
type ToolAccess struct {
	AllowedPackages []string `json:"allowed_packages,omitempty"`
}

// LLMAccess is what an agent asks of the host's LLM broker. Absent or
// Enabled false means no LLM calls.
type LLMAccess struct {
	Enabled        bool     `json:"enabled"`
	MaxCalls       *int     `json:"max_calls,omitempty"`
	MaxInputChars  *int     `json:"max_input_chars,omitempty"`
	MaxOutputChars *int     `json:"max_output_chars,omitempty"`
	AllowedModels  []string `json:"allowed_models,omitempty"`
}

// Limits are an agent's own run limits (ANP agent.limits).
type Limits struct {
	MaxIterations     *int `json:"max_iterations,omitempty"`
	MaxToolCalls      *int `json:"max_tool_calls,omitempty"`
	MaxRuntimeSeconds *int `json:"max_runtime_seconds,omitempty"`
}

// Connector declares that a toolpack uses a credentialed external service.
type Connector struct {
	Provider       string          `json:"provider"`
	AuthType       string          `json:"auth_type,omitempty"`
	Scopes         []string        `json:"scopes,omitempty"`
	TokenRefresh   *bool           `json:"token_refresh,omitempty"`
	AllowedDomains []string        `json:"allowed_domains,omitempty"`
	HealthCheck    json.RawMessage `json:"health_check,omitempty"`
	RateLimits     json.RawMessage `json:"rate_limits,omitempty"`
}

// MCP is ANP's mcp_server section: how an MCP server package is started.
type MCP struct {
	Name           string      `json:"name,omitempty"`
	Transport      string      `json:"transport,omitempty"`
	Command        []string    `json:"command"`
	EnvKeys        []string    `json:"env_keys,omitempty"`
	AllowedDomains []string    `json:"allowed_domains,omitempty"`
	Install        *MCPInstall `json:"install,omitempty"`
	NPMPackage     string      `json:"npm_package,omitempty"`
	PyPIPackage    string      `json:"pypi_package,omitempty"`
	SourceRepo     string      `json:"source_repo,omitempty"`
}

// MCPInstall pins the server's own package (AgentNode's mcp_install).
type MCPInstall struct {
	Manager string `json:"manager"` // npm | pypi
	Package string `json:"package"`
	Version string `json:"version"`
}

// EnvRequirement is one entry of env_requirements.
type EnvRequirement struct {
	Name        string `json:"name"`
	Required    bool   `json:"required,omitempty"`
	Description string `json:"description,omitempty"`
}

// Tool returns the tool called name.
func (m *Manifest) Tool(name string) (*Tool, bool) {
	for i := range m.Tools {
		if m.Tools[i].Name == name {
			return &m.Tools[i], true
		}
	}
	return nil, false
}

var packageIDRe = regexp.MustCompile(`^[a-z0-9-]{3,60}$`)

// ValidPackageID reports whether id is a well-formed package id
// ([a-z0-9-], 3 to 60 characters). Ids are safe to use as a path element.
func ValidPackageID(id string) bool { return packageIDRe.MatchString(id) }

// Load reads dir/agentnode.yaml and checks it. Any problem yields an *Error
// naming the file and the field; a missing or unreadable file is an *Error
// wrapping the I/O error.
func Load(dir string) (*Manifest, error) { return LoadCached(dir, nil) }

// verdictKind names manifest verdicts in a validcache.Cache.
const verdictKind = "agentnode.yaml"

// LoadCached is Load, except that a manifest whose exact bytes this binary
// found valid before (a verdict in cache) is neither converted from YAML nor
// validated against the manifest schema, nor are its tools' input and output
// schemas compiled, again: the verdict keeps the JSON the conversion made.
// The checks that depend on the package directory (entrypoints exist and
// are regular files, MCP commands) run every time, and a manifest that does
// not validate is always reported in full.
func LoadCached(dir string, cache *validcache.Cache) (*Manifest, error) {
	file := filepath.Join(dir, FileName)
	data, msg, err := readFile(file)
	if err != nil {
		return nil, newError(file, err, Problem{Msg: msg})
	}
	raw, known := cache.Kept(verdictKind, data)
	m, problems := parse(data, raw, dir, !known)
	if len(problems) > 0 && known { // report from the manifest itself
		known = false
		m, problems = parse(data, nil, dir, true)
	}
	if len(problems) > 0 {
		return nil, newError(file, nil, problems...)
	}
	if !known {
		cache.Keep(verdictKind, m.Raw, data)
	}
	return m, nil
}

// readFile reads the manifest, refusing symlinks, non-regular files (a
// FIFO never blocks the open) and files over MaxSize (kernel/bounded). On
// error it also returns a message without the path.
func readFile(file string) ([]byte, string, error) {
	data, err := bounded.ReadFile(file, MaxSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "not found: a package directory must contain " + FileName, err
	case errors.Is(err, bounded.ErrNotRegular):
		fi, lerr := os.Lstat(file)
		if lerr != nil {
			return nil, "cannot read: " + pathless(lerr), err
		}
		err := fmt.Errorf("manifest must be a regular file, not %s: %w", describeMode(fi.Mode()), err)
		return nil, fmt.Sprintf("manifest must be a regular file, not %s", describeMode(fi.Mode())), err
	case errors.Is(err, bounded.ErrTooLarge):
		return nil, fmt.Sprintf("manifest is larger than %d bytes", MaxSize), err
	case err != nil:
		return nil, "cannot read: " + pathless(err), err
	}
	return data, "", nil
}

// pathless is err's text without the path a *fs.PathError adds.
func pathless(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func describeMode(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "a symlink"
	case m.IsDir():
		return "a directory"
	}
	return "a special file"
}

// parse converts (unless raw holds data as JSON already), validates and
// decodes; dir is the package directory the entrypoints are checked against.
// With schemas false, the document is known to be valid (LoadCached): the
// schema validation and the compiles of the tools' schemas, which depend on
// data alone, are skipped.
func parse(data, raw []byte, dir string, schemas bool) (*Manifest, []Problem) {
	var problems []Problem
	if len(raw) == 0 {
		if raw, problems = yamlToJSON(data); len(problems) > 0 {
			return nil, problems
		}
	}
	if schemas {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, []Problem{{Msg: fmt.Sprintf("cannot convert to JSON: %v", err)}}
		}
		sch, err := manifestSchema()
		if err != nil {
			return nil, []Problem{{Msg: err.Error()}}
		}
		if err := sch.Validate(doc); err != nil {
			return nil, schemaProblems(err, doc)
		}
	}
	m, problems := decode(raw)
	if len(problems) > 0 {
		return nil, problems
	}
	if problems := check(m, dir, schemas); len(problems) > 0 {
		return nil, problems
	}
	return m, nil
}

// wire is the JSON layout, decoded into Manifest by decode: the tools live
// under capabilities. (The schema has no top-level "tools" key, so the
// embedded Manifest.Tools stays empty.)
type wire struct {
	Manifest
	Capabilities struct {
		Tools []Tool `json:"tools"`
	} `json:"capabilities"`
}

// agentSection is what agentnode reads from the ANP agent section.
type agentSection struct {
	Entrypoint string      `json:"entrypoint"`
	ToolAccess *ToolAccess `json:"tool_access"`
	LLMAccess  *LLMAccess  `json:"llm_access"`
	Limits     *Limits     `json:"limits"`
}

func decode(raw []byte) (*Manifest, []Problem) {
	var w wire
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, []Problem{{Msg: fmt.Sprintf("decode manifest: %v", err)}}
	}
	m := w.Manifest
	m.Tools = w.Capabilities.Tools
	m.Raw = raw
	applyDefaults(&m)
	if len(m.Agent) == 0 {
		return &m, nil
	}
	var a agentSection
	if err := json.Unmarshal(m.Agent, &a); err != nil {
		return nil, []Problem{{Field: "agent", Msg: fmt.Sprintf("decode: %v", err)}}
	}
	var problems []Problem
	merge := func(name string, top, inAgent bool) {
		if top && inAgent {
			problems = append(problems, Problem{Field: "agent." + name,
				Msg: fmt.Sprintf("also set at the top level as %s; set it in one place", name)})
		}
	}
	merge("tool_access", m.ToolAccess != nil, a.ToolAccess != nil)
	merge("llm_access", m.LLMAccess != nil, a.LLMAccess != nil)
	merge("limits", m.Limits != nil, a.Limits != nil)
	if len(problems) > 0 {
		return nil, problems
	}
	m.AgentEntrypoint = a.Entrypoint
	if a.ToolAccess != nil {
		m.ToolAccess = a.ToolAccess
	}
	if a.LLMAccess != nil {
		m.LLMAccess = a.LLMAccess
	}
	if a.Limits != nil {
		m.Limits = a.Limits
	}
	return &m, nil
}

// applyDefaults fills in what ANP 0.2 defaults when a manifest leaves it
// out (AgentNode's normalize_manifest; a 0.1 manifest must say it, which
// the schema checks), and gives every runtime python tool without an
// entrypoint of its own the package-level one.
func applyDefaults(m *Manifest) {
	if m.ManifestVersion == "0.2" {
		if m.Runtime == "" {
			m.Runtime = RuntimePython
		}
		for _, l := range []*string{&m.Permissions.Network.Level, &m.Permissions.Filesystem.Level, &m.Permissions.CodeExecution.Level} {
			if *l == "" {
				*l = LevelNone
			}
		}
	}
	if m.Runtime == RuntimePython && m.Entrypoint != "" {
		for i := range m.Tools {
			if m.Tools[i].Entrypoint == "" {
				m.Tools[i].Entrypoint, m.Tools[i].FromPackage = m.Entrypoint, true
			}
		}
	}
}
