package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/agentnode/agentnode/kernel/reason"
)

// MCP servers run only preinstalled and pinned (specs/mcp.md): the package
// directory already holds the server and everything it needs, the
// mcp_server.install section pins the server's own package to an exact
// version, and mcp_server.command starts a file inside the package with
// nothing in between — no shell, no package-manager launcher that would
// fetch or build anything at run time, no path out of the package. The same
// checks run at install (a manifest problem, exit 2) and at run time on the
// lockfile-sealed fields (a refusal with the returned reason code, exit 3).

// PackMount is where the package directory is mounted in the sandbox; MCP
// commands name files inside the package as PackMount + "/" + relative path.
const PackMount = "/pack"

// MCPInterpreters are the interpreters an MCP command may start a script
// inside the package with, by bare name (resolved on the placement's PATH).
var MCPInterpreters = []string{"node", "python3", "python"}

// mcpLaunchers fetch, build or install a package when run: never a way to
// start a preinstalled server.
var mcpLaunchers = []string{"npx", "npm", "pnpm", "pnpx", "yarn", "bunx", "bun", "deno", "corepack",
	"uvx", "uv", "pip", "pip3", "pipx", "poetry", "pdm", "hatch", "conda", "go", "cargo", "docker", "podman"}

// mcpShells interpret a command line or start other programs by name.
var mcpShells = []string{"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox",
	"env", "exec", "sudo", "su", "xargs", "nohup", "timeout", "cmd", "cmd.exe", "powershell", "pwsh"}

// MCPCommand is a checked mcp_server.command.
type MCPCommand struct {
	// Interpreter is one of MCPInterpreters, or "" when Path is the server
	// binary itself.
	Interpreter string
	// Path is the started file, relative to the package directory
	// ("bin/server").
	Path string
	// Args follow the path.
	Args []string
}

// Argv is the command line inside the sandbox: [PackMount/Path, Args...],
// or [Interpreter, PackMount/Path, Args...].
func (c *MCPCommand) Argv() []string {
	argv := []string{}
	if c.Interpreter != "" {
		argv = append(argv, c.Interpreter)
	}
	argv = append(argv, PackMount+"/"+c.Path)
	return append(argv, c.Args...)
}

// ParseMCPCommand checks the shape of an mcp_server.command: exactly
// [/pack/FILE, ARG...] (a binary inside the package) or [INTERPRETER,
// /pack/FILE, ARG...] with INTERPRETER one of MCPInterpreters. Anything
// else is refused with reason code mcp_not_preinstalled: a shell (sh -c,
// bash, /bin/sh, env, …), a launcher that fetches the server at run time
// (npx, uvx, npm exec, pip, …), an interpreter with options before the
// script (node -e, python3 -c), a relative path, an absolute path outside
// /pack, or a ".." element in the path or any argument. It looks at no
// file; CheckMCPFiles does.
func ParseMCPCommand(cmd []string) (*MCPCommand, error) {
	refuse := func(format string, args ...any) error {
		return reason.New(reason.MCPNotPreinstalled, "mcp_server.command: "+format, args...)
	}
	if len(cmd) == 0 {
		return nil, refuse("empty; it must start the preinstalled server: [/pack/FILE, …] or [node|python3|python, /pack/FILE, …]")
	}
	for i, a := range cmd {
		if a == "" || strings.ContainsAny(a, "\x00\r\n") {
			return nil, refuse("argument %d is empty or contains NUL, CR or LF", i)
		}
	}
	first := cmd[0]
	base := path.Base(strings.ReplaceAll(first, `\`, "/"))
	switch {
	case slices.Contains(mcpLaunchers, base) || slices.Contains(mcpLaunchers, strings.TrimSuffix(base, ".exe")):
		return nil, refuse("%q installs or fetches the server when it runs; agentnode runs only a server preinstalled in the package, started as [/pack/FILE, …] or [node|python3|python, /pack/FILE, …]", first)
	case slices.Contains(mcpShells, base) || isVersioned(base, mcpShells):
		return nil, refuse("%q is a shell or a program launcher; the server is started directly, never through a shell", first)
	}
	c := &MCPCommand{}
	rest := cmd[1:]
	if slices.Contains(MCPInterpreters, first) {
		if len(rest) == 0 {
			return nil, refuse("%s needs the server's script: [%s, /pack/FILE, …]", first, first)
		}
		c.Interpreter = first
		first, rest = rest[0], rest[1:]
		if strings.HasPrefix(first, "-") {
			return nil, refuse("%s option %q: the second element must be the server's script, /pack/FILE", c.Interpreter, first)
		}
	} else if !strings.HasPrefix(first, "/") {
		if isVersioned(base, MCPInterpreters) || strings.Contains(first, "/") || strings.HasPrefix(first, ".") {
			return nil, refuse("%q: write an interpreter as one of %s, and a file as an absolute path %s/FILE inside the package", first, strings.Join(MCPInterpreters, ", "), PackMount)
		}
		return nil, refuse("%q is neither an interpreter (%s) nor a file %s/FILE inside the package", first, strings.Join(MCPInterpreters, ", "), PackMount)
	}
	rel, err := packPath(first)
	if err != nil {
		return nil, refuse("%v", err)
	}
	c.Path = rel
	for i, a := range rest {
		if hasDotDot(a) {
			return nil, refuse("argument %q (%d) contains ..; nothing may point out of the package", a, i+len(cmd)-len(rest))
		}
	}
	c.Args = slices.Clone(rest)
	return c, nil
}

// isVersioned reports whether name is one of names with a version suffix
// ("python3.12", "bash5").
func isVersioned(name string, names []string) bool {
	for _, n := range names {
		if s, ok := strings.CutPrefix(name, n); ok && s != "" && strings.Trim(s, "0123456789.") == "" {
			return true
		}
	}
	return false
}

// packPath returns the package-relative path of p, which must be
// PackMount/FILE with a clean, relative FILE.
func packPath(p string) (string, error) {
	rel, ok := strings.CutPrefix(p, PackMount+"/")
	switch {
	case strings.Contains(p, `\`):
		return "", fmt.Errorf("%q: use / as the path separator", p)
	case hasDotDot(p):
		return "", fmt.Errorf("%q contains ..; the server must be a file inside the package", p)
	case !ok:
		return "", fmt.Errorf("%q is outside the package; the server must be a file %s/FILE inside it", p, PackMount)
	case rel == "" || path.Clean(rel) != rel || !filepath.IsLocal(filepath.FromSlash(rel)):
		return "", fmt.Errorf("%q is not a clean path %s/FILE inside the package", p, PackMount)
	}
	return rel, nil
}

// hasDotDot reports whether s has a ".." path element.
func hasDotDot(s string) bool {
	for _, e := range strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '\\' || r == '=' }) {
		if e == ".." {
			return true
		}
	}
	return false
}

// CheckMCPFiles checks that c's file is in the package directory dir: a
// regular file (a binary must be executable), not a symlink, resolved
// inside the package. A missing or wrong file is mcp_not_preinstalled.
func CheckMCPFiles(dir string, c *MCPCommand) error {
	refuse := func(format string, args ...any) error {
		return reason.New(reason.MCPNotPreinstalled, "mcp_server.command: "+format, args...)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return refuse("cannot open the package directory: %w", err)
	}
	defer root.Close()
	p := PackMount + "/" + c.Path
	fi, err := root.Lstat(filepath.FromSlash(c.Path))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return refuse("%s does not exist in the package: the server must be preinstalled in it", p)
	case err != nil:
		return refuse("%s: %w", p, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return refuse("%s is a symlink; it must be a regular file", p)
	case !fi.Mode().IsRegular():
		return refuse("%s is %s; it must be a regular file", p, describeMode(fi.Mode()))
	case c.Interpreter == "" && fi.Mode().Perm()&0o111 == 0:
		return refuse("%s is not executable (chmod +x it, or start it with an interpreter)", p)
	}
	return nil
}

// npmNameRe is an npm package name (optionally @scope/), as npm publishes
// them: lower case, no version, tag or URL.
var npmNameRe = regexp.MustCompile(`^(@[a-z0-9-~][a-z0-9-._~]*/)?[a-z0-9-~][a-z0-9-._~]*$`)

// pypiNameRe is a PyPI project name (PEP 508 names), without extras or a
// version specifier.
var pypiNameRe = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// pep440Re is one exact PEP 440 public version: no wildcard, no operator,
// no local part.
var pep440Re = regexp.MustCompile(`^([1-9][0-9]*!)?(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))*` +
	`((a|b|rc)(0|[1-9][0-9]*))?(\.post(0|[1-9][0-9]*))?(\.dev(0|[1-9][0-9]*))?$`)

// CheckMCPInstall checks mcp_server.install: the server's own package,
// pinned to one exact version. Absent is mcp_not_preinstalled; a range, a
// tag, a wildcard, a git, file, link or workspace source, or a package name
// carrying a version is mcp_unpinned.
func CheckMCPInstall(in *MCPInstall) error {
	if in == nil {
		return reason.New(reason.MCPNotPreinstalled,
			"mcp_server.install: missing: an MCP server runs only preinstalled in the package and pinned, {manager: npm|pypi, package: NAME, version: EXACT}")
	}
	unpinned := func(field, format string, args ...any) error {
		return reason.New(reason.MCPUnpinned, "mcp_server.install."+field+": "+format, args...)
	}
	v := in.Version
	switch in.Manager {
	case "npm":
		if !npmNameRe.MatchString(in.Package) {
			return unpinned("package", "%q is not an npm package name (a name only: no version, tag, URL or path)", in.Package)
		}
		if !ValidSemver(v) {
			return unpinned("version", "%q is not an exact version (%s); write one MAJOR.MINOR.PATCH", v, npmVersionKind(v))
		}
	case "pypi":
		if !pypiNameRe.MatchString(in.Package) {
			return unpinned("package", "%q is not a PyPI project name (a name only: no extras, specifier or URL)", in.Package)
		}
		if !pep440Re.MatchString(v) {
			return unpinned("version", "%q is not an exact version (%s); write one PEP 440 version such as 1.4.2", v, pypiVersionKind(v))
		}
	default:
		return unpinned("manager", "%q is not npm or pypi", in.Manager)
	}
	return nil
}

var (
	partialVersionRe = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
	distTagRe        = regexp.MustCompile(`^[a-z][a-z0-9._-]*$`)
)

// npmVersionKind says what an npm version that is not exact is instead.
func npmVersionKind(v string) string {
	lv := strings.ToLower(strings.TrimSpace(v))
	switch {
	case lv == "":
		return "empty"
	case strings.HasPrefix(lv, "git+") || strings.HasPrefix(lv, "git:") || strings.HasPrefix(lv, "github:") ||
		strings.HasPrefix(lv, "gitlab:") || strings.HasPrefix(lv, "bitbucket:") || strings.HasPrefix(lv, "http:") ||
		strings.HasPrefix(lv, "https:"):
		return "a git or URL source"
	case strings.HasPrefix(lv, "file:") || strings.HasPrefix(lv, "link:") || strings.HasPrefix(lv, "workspace:") ||
		strings.HasPrefix(lv, "portal:") || strings.HasPrefix(lv, "npm:"):
		return "a local, workspace or alias source"
	case strings.ContainsAny(lv, "^~<>=|*") || strings.Contains(lv, " - "):
		return "a range"
	case slices.Contains(strings.FieldsFunc(strings.TrimPrefix(lv, "v"), func(r rune) bool { return r == '.' }), "x"):
		return "a range"
	case strings.HasPrefix(lv, "v") && ValidSemver(lv[1:]):
		return `a "v" prefix`
	case partialVersionRe.MatchString(lv):
		return "a range: npm reads a partial version as every version in it"
	case distTagRe.MatchString(lv):
		return "a dist-tag, which moves"
	}
	return "not a version"
}

// pypiVersionKind says what a PyPI version that is not exact is instead.
func pypiVersionKind(v string) string {
	lv := strings.TrimSpace(v)
	switch {
	case lv == "":
		return "empty"
	case strings.Contains(lv, "*"):
		return "a wildcard"
	case strings.ContainsAny(lv, "<>=!~,"):
		return "a specifier"
	case strings.Contains(lv, "+"):
		return "a local version"
	case strings.HasPrefix(lv, "git+") || strings.Contains(lv, "://") || strings.HasPrefix(lv, "file:"):
		return "a VCS, URL or file source"
	}
	return "not a PEP 440 version"
}

// CheckMCPLaunch checks an mcp_server section completely against the
// package directory dir (empty: no file check): the install pin, the
// command's shape and file, and that an interpreter fits the manager (node
// for npm, python for pypi; a binary fits either). It returns the parsed
// command; errors carry mcp_not_preinstalled or mcp_unpinned.
func CheckMCPLaunch(m *MCP, dir string) (*MCPCommand, error) {
	if m == nil {
		return nil, reason.New(reason.MCPNotPreinstalled, "the package has no mcp_server section")
	}
	if err := CheckMCPInstall(m.Install); err != nil {
		return nil, err
	}
	c, err := ParseMCPCommand(m.Command)
	if err != nil {
		return nil, err
	}
	switch {
	case c.Interpreter == "node" && m.Install.Manager != "npm",
		strings.HasPrefix(c.Interpreter, "python") && m.Install.Manager != "pypi":
		return nil, reason.New(reason.MCPNotPreinstalled,
			"mcp_server.command: interpreter %s does not fit mcp_server.install.manager %s", c.Interpreter, m.Install.Manager)
	}
	if dir != "" {
		if err := CheckMCPFiles(dir, c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// checkMCP is CheckMCPLaunch as manifest problems (install time).
func checkMCP(m *Manifest, dir string) []Problem {
	if m.PackageType != TypeMCPServer || m.MCP == nil {
		return nil
	}
	_, err := CheckMCPLaunch(m.MCP, dir)
	if err == nil {
		return nil
	}
	msg := err.Error()
	field, rest, ok := strings.Cut(msg, ": ")
	if !ok || !strings.HasPrefix(field, "mcp_server") {
		field, rest = "mcp_server", msg
	}
	return []Problem{{Field: field, Msg: rest + " [" + string(reason.CodeOf(err)) + "]"}}
}
