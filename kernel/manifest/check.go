package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// semverRe is the regular expression published with Semantic Versioning
// 2.0.0 (semver.org): no leading "v", no leading zeros, MAJOR.MINOR.PATCH
// with optional pre-release and build metadata.
var semverRe = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// ValidSemver reports whether v is a strict Semantic Versioning 2.0.0
// version.
func ValidSemver(v string) bool { return semverRe.MatchString(v) }

// pythonEntrypointRe is module.path:function (ANP 0.2 tool entrypoints).
var pythonEntrypointRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$`)

// check does what the schema cannot: cross-field and file-system checks.
func check(m *Manifest, dir string, schemas bool) []Problem {
	var problems []Problem
	bad := func(field, format string, args ...any) {
		problems = append(problems, Problem{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if !ValidSemver(m.Version) {
		bad("version", "%q is not a semantic version (MAJOR.MINOR.PATCH, semver.org)", m.Version)
	}
	if m.Permissions.Network.Level == NetworkNone && len(m.Permissions.Network.AllowedDomains) > 0 {
		bad("permissions.network.allowed_domains", "must be empty when permissions.network.level is none")
	}
	if m.AgentEntrypoint != "" {
		switch m.Runtime {
		case RuntimeExec:
			if msg := checkExecEntrypoint(dir, m.AgentEntrypoint); msg != "" {
				bad("agent.entrypoint", "%s", msg)
			}
		case RuntimePython:
			if !pythonEntrypointRe.MatchString(m.AgentEntrypoint) {
				bad("agent.entrypoint", "%q is not module.path:function", m.AgentEntrypoint)
			}
		}
	}
	if m.MCP != nil && len(m.MCP.AllowedDomains) > 0 && m.Permissions.Network.Level == NetworkNone {
		bad("mcp_server.allowed_domains", "must be empty when permissions.network.level is none")
	}
	problems = append(problems, checkMCP(m, dir)...) // mcp.go: preinstalled and pinned
	seen := map[string]int{}
	for i, t := range m.Tools {
		f := fmt.Sprintf("capabilities.tools[%d]", i)
		if first, dup := seen[t.Name]; dup {
			bad(f+".name", "duplicate tool name %q (also capabilities.tools[%d])", t.Name, first)
		} else {
			seen[t.Name] = i
		}
		if schemas { // else known valid (LoadCached): they compiled before
			if _, err := CompileSchema(t.InputSchema); err != nil {
				problems = append(problems, compileProblems(f+".input_schema", t.InputSchema, err)...)
			}
			if t.OutputSchema != nil {
				if _, err := CompileSchema(t.OutputSchema); err != nil {
					problems = append(problems, compileProblems(f+".output_schema", t.OutputSchema, err)...)
				}
			}
		}
		switch m.Runtime {
		case RuntimeExec:
			if msg := checkExecEntrypoint(dir, t.Entrypoint); msg != "" {
				bad(f+".entrypoint", "%s", msg)
			}
		case RuntimePython:
			if !pythonEntrypointRe.MatchString(t.Entrypoint) {
				bad(f+".entrypoint", "%q is not module.path:function", t.Entrypoint)
			}
		}
	}
	return problems
}

// checkExecEntrypoint returns what is wrong with ep as an exec entrypoint
// of the package in dir, or "". The path is resolved with os.Root, so a
// symlinked directory on the way cannot lead outside the package.
func checkExecEntrypoint(dir, ep string) string {
	switch {
	case strings.Contains(ep, `\`):
		return fmt.Sprintf("%q: use / as the path separator", ep)
	case path.IsAbs(ep) || filepath.IsAbs(ep):
		return fmt.Sprintf("%q is absolute; it must be a path inside the package", ep)
	case ep == ".." || strings.HasPrefix(ep, "../") || strings.Contains(ep, "/../") || strings.HasSuffix(ep, "/.."):
		return fmt.Sprintf("%q contains ..; it must be a path inside the package", ep)
	case path.Clean(ep) != ep || ep == ".":
		return fmt.Sprintf("%q is not a clean relative path (write %q)", ep, path.Clean(ep))
	case !filepath.IsLocal(filepath.FromSlash(ep)):
		return fmt.Sprintf("%q is not a path inside the package", ep)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Sprintf("cannot open the package directory: %v", err)
	}
	defer root.Close()
	fi, err := root.Lstat(filepath.FromSlash(ep))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%q does not exist in the package", ep)
	case err != nil:
		return fmt.Sprintf("%q: %v", ep, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Sprintf("%q is a symlink; it must be a regular file", ep)
	case !fi.Mode().IsRegular():
		return fmt.Sprintf("%q is %s; it must be a regular file", ep, describeMode(fi.Mode()))
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Sprintf("%q is not executable (chmod +x it)", ep)
	}
	return ""
}
