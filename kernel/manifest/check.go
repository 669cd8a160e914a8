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

// pythonModuleRe is a dotted Python module path; pythonEntrypointRe is
// module.path or module.path:function (ANP's entrypoints, the package's
// and its tools'); pythonFunctionRe is module.path:function (agent
// entrypoints). Every part is an (ASCII) Python identifier.
const pythonModuleRe = `[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*`

var (
	pythonEntrypointRe = regexp.MustCompile(`^` + pythonModuleRe + `(:[A-Za-z_][A-Za-z0-9_]*)?$`)
	pythonFunctionRe   = regexp.MustCompile(`^` + pythonModuleRe + `:[A-Za-z_][A-Za-z0-9_]*$`)
)

// pythonEntrypointProblem says why ep is not a Python entrypoint of the
// form want describes.
func pythonEntrypointProblem(ep, want string) string {
	msg := fmt.Sprintf("%q is not a Python entrypoint: write %s (Python identifiers joined by dots, e.g. my_pack.tool:run)", ep, want)
	if strings.ContainsAny(ep, `/\`) || strings.HasSuffix(ep, ".py") {
		msg += "; it names a module, not a file path"
	}
	return msg
}

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
	checked := map[string]string{} // tools often share an entrypoint: one lstat each
	execEP := func(ep string) string {
		if msg, ok := checked[ep]; ok {
			return msg
		}
		checked[ep] = checkExecEntrypoint(dir, ep)
		return checked[ep]
	}
	if m.AgentEntrypoint != "" {
		switch m.Runtime {
		case RuntimeExec:
			if msg := execEP(m.AgentEntrypoint); msg != "" {
				bad("agent.entrypoint", "%s", msg)
			}
		case RuntimePython:
			if !pythonFunctionRe.MatchString(m.AgentEntrypoint) {
				bad("agent.entrypoint", "%s", pythonEntrypointProblem(m.AgentEntrypoint, "module.path:function"))
			}
		}
	}
	if m.Runtime == RuntimePython && m.Entrypoint != "" && !pythonEntrypointRe.MatchString(m.Entrypoint) {
		bad("entrypoint", "%s", pythonEntrypointProblem(m.Entrypoint, "module.path or module.path:function"))
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
		problems = append(problems, checkToolEntrypoint(m, execEP, f+".entrypoint", &m.Tools[i])...)
	}
	return problems
}

// checkToolEntrypoint checks the entrypoint of tool t (at field); execEP
// is checkExecEntrypoint in the package directory.
func checkToolEntrypoint(m *Manifest, execEP func(string) string, field string, t *Tool) []Problem {
	bad := func(format string, args ...any) []Problem {
		return []Problem{{Field: field, Msg: fmt.Sprintf(format, args...)}}
	}
	switch m.Runtime {
	case RuntimeExec:
		if t.Entrypoint == "" {
			return bad("missing: runtime exec needs a path to an executable inside the package for every tool")
		}
		if msg := execEP(t.Entrypoint); msg != "" {
			return bad("%s", msg)
		}
	case RuntimePython:
		switch {
		case t.Entrypoint == "":
			return bad("missing: name module.path:function here, or the package-level entrypoint")
		case t.FromPackage && m.ManifestVersion == "0.2" && len(m.Tools) > 1:
			// ANP 0.2: no silent fallback for a package of several tools.
			return bad("missing: a 0.2 manifest with several tools names each tool's own entrypoint (module.path:function)")
		case t.FromPackage:
			// The package-level entrypoint, checked as such.
		case !pythonEntrypointRe.MatchString(t.Entrypoint):
			return bad("%s", pythonEntrypointProblem(t.Entrypoint, "module.path:function or module.path"))
		}
	case RuntimeMCP:
		if t.Entrypoint == "" {
			return bad("missing: runtime mcp needs the tool's name on the MCP server")
		}
	}
	return nil
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
