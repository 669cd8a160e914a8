package manifest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/reason"
)

// Every way to start something other than the preinstalled server is
// refused with mcp_not_preinstalled, naming what is wrong.
func TestParseMCPCommandRefuses(t *testing.T) {
	cases := []struct {
		cmd  []string
		want string
	}{
		{nil, "empty"},
		{[]string{"npx", "-y", "@scope/some-mcp@1.2.3"}, "installs or fetches the server"},
		{[]string{"/usr/local/bin/npx", "some-mcp"}, "installs or fetches the server"},
		{[]string{"uvx", "mcp-server-time"}, "installs or fetches the server"},
		{[]string{"npm", "exec", "some-mcp"}, "installs or fetches the server"},
		{[]string{"pip", "install", "x"}, "installs or fetches the server"},
		{[]string{"pipx", "run", "x"}, "installs or fetches the server"},
		{[]string{"yarn", "dlx", "x"}, "installs or fetches the server"},
		{[]string{"pnpm", "dlx", "x"}, "installs or fetches the server"},
		{[]string{"bunx", "x"}, "installs or fetches the server"},
		{[]string{"uv", "run", "x"}, "installs or fetches the server"},
		{[]string{"sh", "-c", "node /pack/server.js"}, "shell"},
		{[]string{"bash", "/pack/run.sh"}, "shell"},
		{[]string{"/bin/sh", "/pack/run.sh"}, "shell"},
		{[]string{"/usr/bin/env", "node", "/pack/s.js"}, "shell"},
		{[]string{"busybox", "sh"}, "shell"},
		{[]string{"bash5", "x"}, "shell"},
		{[]string{"../server"}, "write an interpreter"},
		{[]string{"./server"}, "write an interpreter"},
		{[]string{"bin/server"}, "write an interpreter"},
		{[]string{"server"}, "neither an interpreter"},
		{[]string{"/usr/bin/some-mcp"}, "outside the package"},
		{[]string{"/usr/bin/node", "/pack/s.js"}, "outside the package"},
		{[]string{"/pack/../etc/passwd"}, "contains .."},
		{[]string{"/pack/bin/../../x"}, "contains .."},
		{[]string{"/pack/"}, "not a clean path"},
		{[]string{"/pack/./bin/server"}, "not a clean path"},
		{[]string{"/pack//bin/server"}, "not a clean path"},
		{[]string{`/pack/bin\server`}, "separator"},
		{[]string{"/packs/server"}, "outside the package"},
		{[]string{"node"}, "needs the server's script"},
		{[]string{"node", "-e", "require('child_process')"}, "must be the server's script"},
		{[]string{"python3", "-c", "import os"}, "must be the server's script"},
		{[]string{"python3", "-m", "mcp_server_time"}, "must be the server's script"},
		{[]string{"node", "server.js"}, "outside the package"},
		{[]string{"node", "/srv/server.js"}, "outside the package"},
		{[]string{"node", "../server.js"}, "contains .."},
		{[]string{"python3.12", "/pack/s.py"}, "write an interpreter"},
		{[]string{"/pack/bin/server", "--root=../.."}, "contains .."},
		{[]string{"/pack/bin/server", "../secrets"}, "contains .."},
		{[]string{"/pack/bin/server", "a\nb"}, "NUL, CR or LF"},
		{[]string{"/pack/bin/server", ""}, "empty"},
	}
	for _, c := range cases {
		_, err := ParseMCPCommand(c.cmd)
		if err == nil {
			t.Errorf("%q: accepted", c.cmd)
			continue
		}
		if reason.CodeOf(err) != reason.MCPNotPreinstalled || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v [%s], want mcp_not_preinstalled containing %q", c.cmd, err, reason.CodeOf(err), c.want)
		}
	}
}

func TestParseMCPCommandAccepts(t *testing.T) {
	cases := []struct {
		cmd         []string
		interp, rel string
		args        []string
	}{
		{[]string{"/pack/bin/server"}, "", "bin/server", nil},
		{[]string{"/pack/venv/bin/python3", "/pack/server.py"}, "", "venv/bin/python3", []string{"/pack/server.py"}},
		{[]string{"node", "/pack/node_modules/@scope/some-mcp/dist/index.js", "--stdio"}, "node",
			"node_modules/@scope/some-mcp/dist/index.js", []string{"--stdio"}},
		{[]string{"python3", "/pack/server.py"}, "python3", "server.py", nil},
		{[]string{"python", "/pack/server.py"}, "python", "server.py", nil},
		{[]string{"/pack/bin/server", "--name=a..b"}, "", "bin/server", []string{"--name=a..b"}},
	}
	for _, c := range cases {
		got, err := ParseMCPCommand(c.cmd)
		if err != nil {
			t.Errorf("%q: %v", c.cmd, err)
			continue
		}
		if got.Interpreter != c.interp || got.Path != c.rel || !slices.Equal(got.Args, c.args) {
			t.Errorf("%q: parsed %+v", c.cmd, got)
		}
		if !slices.Equal(got.Argv(), c.cmd) {
			t.Errorf("%q: Argv %q", c.cmd, got.Argv())
		}
	}
}

// Every unpinned version form is mcp_unpinned, saying what it is; exact
// versions pass.
func TestCheckMCPInstallVersions(t *testing.T) {
	refused := []struct {
		manager, pkg, version, want string
	}{
		{"npm", "some-mcp", "^1.0.0", "a range"},
		{"npm", "some-mcp", "~1.2", "a range"},
		{"npm", "some-mcp", "~1.2.3", "a range"},
		{"npm", "some-mcp", "1.x", "a range"},
		{"npm", "some-mcp", "1.2.x", "a range"},
		{"npm", "some-mcp", "*", "a range"},
		{"npm", "some-mcp", "x", "a range"},
		{"npm", "some-mcp", ">=1.0.0", "a range"},
		{"npm", "some-mcp", "1.0.0 - 2.0.0", "a range"},
		{"npm", "some-mcp", "1.0.0 || 2.0.0", "a range"},
		{"npm", "some-mcp", "1", "partial version"},
		{"npm", "some-mcp", "1.2", "partial version"},
		{"npm", "some-mcp", "latest", "dist-tag"},
		{"npm", "some-mcp", "next", "dist-tag"},
		{"npm", "some-mcp", "beta", "dist-tag"},
		{"npm", "some-mcp", "v1.2.3", `"v" prefix`},
		{"npm", "some-mcp", "git+https://github.com/x/y.git#v1.0.0", "git or URL"},
		{"npm", "some-mcp", "github:x/y", "git or URL"},
		{"npm", "some-mcp", "https://example.com/x.tgz", "git or URL"},
		{"npm", "some-mcp", "file:../x", "local, workspace"},
		{"npm", "some-mcp", "link:../x", "local, workspace"},
		{"npm", "some-mcp", "workspace:*", "local, workspace"},
		{"npm", "some-mcp", "npm:other@1.0.0", "local, workspace or alias"},
		{"npm", "some-mcp@1.0.0", "1.0.0", "npm package name"},
		{"npm", "git+https://github.com/x/y.git", "1.0.0", "npm package name"},
		{"pypi", "mcp-server-time", "*", "wildcard"},
		{"pypi", "mcp-server-time", "1.*", "wildcard"},
		{"pypi", "mcp-server-time", ">=1.0", "specifier"},
		{"pypi", "mcp-server-time", "==1.0", "specifier"},
		{"pypi", "mcp-server-time", "~=1.0", "specifier"},
		{"pypi", "mcp-server-time", "1.0+local", "local version"},
		{"pypi", "mcp-server-time", "latest", "not a PEP 440"},
		{"pypi", "mcp-server-time==1.0", "1.0", "PyPI project name"},
		{"pypi", "mcp-server-time[cli]", "1.0", "PyPI project name"},
		{"cargo", "x", "1.0.0", "not npm or pypi"},
	}
	for _, c := range refused {
		err := CheckMCPInstall(&MCPInstall{Manager: c.manager, Package: c.pkg, Version: c.version})
		if err == nil {
			t.Errorf("%s %s %q: accepted", c.manager, c.pkg, c.version)
			continue
		}
		if reason.CodeOf(err) != reason.MCPUnpinned || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s %q: %v [%s], want mcp_unpinned containing %q", c.manager, c.pkg, c.version, err, reason.CodeOf(err), c.want)
		}
	}
	for _, in := range []MCPInstall{
		{"npm", "some-mcp", "1.2.3"}, {"npm", "@scope/some-mcp", "0.6.2"}, {"npm", "x", "1.0.0-rc.1+b5"},
		{"pypi", "mcp-server-time", "2026.8.18"}, {"pypi", "mcp_server.x", "1.0"}, {"pypi", "x", "1.0rc1"},
		{"pypi", "x", "1.0.post2.dev3"}, {"pypi", "x", "1!2.0"},
	} {
		if err := CheckMCPInstall(&in); err != nil {
			t.Errorf("%+v: %v", in, err)
		}
	}
	if err := CheckMCPInstall(nil); reason.CodeOf(err) != reason.MCPNotPreinstalled {
		t.Errorf("no install section: %v", err)
	}
}

// At install, Load refuses what the runtime would refuse, naming the field
// and the code: a missing pin, an unpinned version, a launcher, a file
// outside or missing from the package, an interpreter that does not fit
// the manager.
func TestLoadChecksMCPServer(t *testing.T) {
	set := func(f func(mcp map[string]any)) func(m map[string]any) {
		return func(m map[string]any) { f(m["mcp_server"].(map[string]any)) }
	}
	install := func(mcp map[string]any) map[string]any { return mcp["install"].(map[string]any) }
	cases := []struct {
		name, field, msg string
		mutate           func(m map[string]any)
	}{
		{"no install", "mcp_server.install", "missing: an MCP server runs only preinstalled", set(func(s map[string]any) { delete(s, "install") })},
		{"caret", "mcp_server.install.version", `"^1.2.3" is not an exact version (a range)`,
			set(func(s map[string]any) { install(s)["version"] = "^1.2.3" })},
		{"latest", "mcp_server.install.version", "[mcp_unpinned]",
			set(func(s map[string]any) { install(s)["version"] = "latest" })},
		{"npx", "mcp_server.command", `"npx" installs or fetches the server`,
			set(func(s map[string]any) { s["command"] = []any{"npx", "-y", "@scope/echo-mcp@1.2.3"} })},
		{"sh -c", "mcp_server.command", "[mcp_not_preinstalled]",
			set(func(s map[string]any) { s["command"] = []any{"sh", "-c", "node /pack/bin/echo"} })},
		{"missing file", "mcp_server.command", "/pack/bin/nope does not exist in the package",
			set(func(s map[string]any) { s["command"] = []any{"node", "/pack/bin/nope"} })},
		{"not executable", "mcp_server.command", "/pack/bin/data.txt is not executable",
			set(func(s map[string]any) { s["command"] = []any{"/pack/bin/data.txt"} })},
		{"python for npm", "mcp_server.command", "interpreter python3 does not fit mcp_server.install.manager npm",
			set(func(s map[string]any) { s["command"] = []any{"python3", "/pack/bin/echo"} })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := mcpManifest()
			c.mutate(m)
			wantProblem(t, loadErr(t, packageDir(t, toYAML(t, m))), c.field, c.msg)
		})
	}

	// A binary inside the package alone is a complete command.
	m := mcpManifest()
	m["mcp_server"].(map[string]any)["command"] = []any{"/pack/bin/echo"}
	if _, err := Load(packageDir(t, toYAML(t, m))); err != nil {
		t.Fatal(err)
	}
	// A symlink is refused even when it points inside the package.
	m["mcp_server"].(map[string]any)["command"] = []any{"/pack/bin/link"}
	dir := packageDir(t, toYAML(t, m))
	if err := os.Symlink("echo", filepath.Join(dir, "bin", "link")); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, loadErr(t, dir), "mcp_server.command", "is a symlink")
}
