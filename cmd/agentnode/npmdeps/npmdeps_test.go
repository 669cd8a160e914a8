package npmdeps

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/nodeimage"
	"github.com/agentnode/agentnode/cmd/agentnode/pydeps"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// realLock is the shape npm 9 writes (lockfileVersion 3) for
// `npm install --save-exact @modelcontextprotocol/server-memory@2026.8.31`,
// cut to three packages: the integrity values are the registry's.
const realLock = `{
  "name": "locked",
  "lockfileVersion": 3,
  "requires": true,
  "packages": {
    "": {"dependencies": {"@modelcontextprotocol/server-memory": "2026.8.31"}},
    "node_modules/@hono/node-server": {
      "version": "2.1.11",
      "integrity": "sha512-KzKz9vl4vvr1vgLHamj+g5uonbrj5NwAdO3yzOS6cd2HjALVeOgTgeZOyAzNxejbkfOOPIcvuf/Tg8l1pEFLog==",
      "license": "MIT", "engines": {"node": ">=20"}, "peerDependencies": {"hono": "^4 || ^5.0.0-0"}
    },
    "node_modules/@modelcontextprotocol/server-memory": {
      "version": "2026.8.31",
      "resolved": "https://registry.npmjs.org/@modelcontextprotocol/server-memory/-/server-memory-2026.8.31.tgz",
      "integrity": "sha512-KzKz9vl4vvr1vgLHamj+g5uonbrj5NwAdO3yzOS6cd2HjALVeOgTgeZOyAzNxejbkfOOPIcvuf/Tg8l1pEFLog==",
      "dependencies": {"@hono/node-server": "2.1.11"}
    },
    "node_modules/@modelcontextprotocol/server-memory/node_modules/x": {"version": "1.0.0", "inBundle": true}
  }
}`

var pin = &manifest.MCPInstall{Manager: "npm", Package: "@modelcontextprotocol/server-memory", Version: "2026.8.31"}

func writePkg(t *testing.T, lock string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, PackageJSON), []byte(`{"dependencies":{"@modelcontextprotocol/server-memory":"2026.8.31"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if lock != "" {
		if err := os.WriteFile(filepath.Join(dir, LockFile), []byte(lock), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCheckAcceptsALockedTree(t *testing.T) {
	got, err := Check(writePkg(t, realLock), pin)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"@hono/node-server@2.1.11", "@modelcontextprotocol/server-memory@2026.8.31", "x@1.0.0"}
	if !slices.Equal(got, want) {
		t.Fatalf("installed %v, want %v", got, want)
	}
}

func TestCheckRefuses(t *testing.T) {
	const sm = `"node_modules/@modelcontextprotocol/server-memory": {
      "version": "2026.8.31",`
	for _, c := range []struct {
		name, lock, want string
	}{
		{"no lock", "", "no package-lock.json: an unlocked tree is not installed"},
		{"lockfileVersion 1", strings.Replace(realLock, `"lockfileVersion": 3`, `"lockfileVersion": 1`, 1), "lockfileVersion 1"},
		{"range at the root", strings.Replace(realLock, `"@modelcontextprotocol/server-memory": "2026.8.31"}}`, `"@modelcontextprotocol/server-memory": "^2026.8.31"}}`, 1),
			"the lock must depend on exactly that version"},
		{"other version installed", strings.Replace(realLock, sm, strings.Replace(sm, "2026.8.31", "2026.1.1", 1), 1), `is version "2026.1.1"`},
		{"no integrity", strings.Replace(realLock, `"integrity": "sha512-KzKz9vl4vvr1vgLHamj+g5uonbrj5NwAdO3yzOS6cd2HjALVeOgTgeZOyAzNxejbkfOOPIcvuf/Tg8l1pEFLog==",
      "license"`, `"license"`, 1), "@hono/node-server@2.1.11 has no integrity hash"},
		{"weak integrity", strings.Replace(realLock, `"integrity": "sha512-KzKz9vl4`, `"integrity": "md5-KzKz9vl4`, 1), "is not a sha512"},
		{"install script", strings.Replace(realLock, `"license": "MIT",`, `"license": "MIT", "hasInstallScript": true,`, 1),
			"@hono/node-server@2.1.11 needs an install script (hasInstallScript)"},
		{"git source", strings.Replace(realLock, `"resolved": "https://registry.npmjs.org/`, `"resolved": "git+ssh://git@github.com/`, 1), "not from a registry over https"},
		{"link", strings.Replace(realLock, `"version": "1.0.0", "inBundle": true`, `"version": "1.0.0", "link": true`, 1), "is a link to a local directory"},
		{"workspace", strings.Replace(realLock, `"node_modules/@hono/node-server": {`, `"packages/evil": {`, 1), "is not in node_modules"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Check(writePkg(t, c.lock), pin)
			if !errors.Is(err, ErrLock) || reason.CodeOf(err) != reason.MCPUnpinned || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v (code %s), want ErrLock, mcp_unpinned and %q", err, reason.CodeOf(err), c.want)
			}
		})
	}
}

func TestNeeded(t *testing.T) {
	m := &manifest.Manifest{PackageType: manifest.TypeMCPServer, MCP: &manifest.MCP{Install: pin}}
	dir := writePkg(t, realLock)
	if !Needed(dir, m) {
		t.Fatal("a locked package without node_modules: not needed")
	}
	if Needed(dir, &manifest.Manifest{PackageType: manifest.TypeMCPServer,
		MCP: &manifest.MCP{Install: &manifest.MCPInstall{Manager: "pypi", Package: "x", Version: "1"}}}) {
		t.Fatal("a pypi server: needed")
	}
	if err := os.Mkdir(filepath.Join(dir, ModulesDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if Needed(dir, m) {
		t.Fatal("a preinstalled node_modules: needed")
	}
	if Needed(t.TempDir(), m) {
		t.Fatal("no package.json or lock: needed")
	}
}

// TestWithResolved: a lock written with omit-lockfile-registry-resolved
// gets the registry's tarball address for every registry entry without
// one; entries with an address and bundled entries keep theirs, an alias
// is found by its real name, and an entry whose name or version could
// make another address is refused.
func TestWithResolved(t *testing.T) {
	out, err := withResolved([]byte(realLock))
	if err != nil {
		t.Fatal(err)
	}
	var doc lockDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"node_modules/@hono/node-server":                                  "https://registry.npmjs.org/@hono/node-server/-/node-server-2.1.11.tgz",
		"node_modules/@modelcontextprotocol/server-memory":                "https://registry.npmjs.org/@modelcontextprotocol/server-memory/-/server-memory-2026.8.31.tgz",
		"node_modules/@modelcontextprotocol/server-memory/node_modules/x": "",
	} {
		if got := doc.Packages[key].Resolved; got != want {
			t.Errorf("%s: resolved %q, want %q", key, got, want)
		}
	}
	if doc.LockfileVersion != 3 || doc.Packages["node_modules/@hono/node-server"].Integrity == "" {
		t.Errorf("the rest of the lock changed: %s", out)
	}
	complete := strings.Replace(realLock, `"version": "2.1.11",`, `"version": "2.1.11", "resolved": "https://registry.npmjs.org/@hono/node-server/-/node-server-2.1.11.tgz",`, 1)
	if out, err := withResolved([]byte(complete)); err != nil || string(out) != complete {
		t.Errorf("a complete lock was rewritten: %v\n%s", err, out)
	}
	alias := strings.Replace(realLock, `"node_modules/@hono/node-server": {`, `"node_modules/hono-alias": {"name": "@hono/node-server",`, 1)
	if out, err := withResolved([]byte(alias)); err != nil || !strings.Contains(string(out), `"https://registry.npmjs.org/@hono/node-server/-/node-server-2.1.11.tgz"`) {
		t.Errorf("alias: %v\n%s", err, out)
	}
	for _, bad := range []string{
		strings.Replace(realLock, `"version": "2.1.11",`, `"version": "2.1.11/../../evil",`, 1),
		strings.Replace(realLock, `"node_modules/@hono/node-server": {`, `"node_modules/@hono/node-server": {"name": "../evil",`, 1),
		strings.Replace(realLock, `"node_modules/@hono/node-server": {`, `"node_modules/@Hono/Node?x=": {`, 1),
	} {
		if out, err := withResolved([]byte(bad)); err == nil {
			t.Errorf("accepted a lock with a bad name or version:\n%s", out)
		}
	}
}

// TestRegistryScript: from a registry, npm runs online behind the
// queueing forwarder (at most MaxTunnels connections to the egress socket
// at once), told that proxy explicitly, with the image's bundle or
// --npm-cert's copy; from a cache, offline and without it.
func TestRegistryScript(t *testing.T) {
	offline := (&Installer{Cache: "/c"}).script()
	if !strings.Contains(offline, " --offline ") || strings.Contains(offline, profile.EgressForwarderPath) {
		t.Errorf("cache script:\n%s", offline)
	}
	in := &Installer{Registry: "https://registry.npmjs.org/", EgressSocket: "/s"}
	wrap := profile.EgressForwarderPath + " -listen 127.0.0.1:3129 -socket " + profile.EgressSocketPath + " -max-active 16 -- " + nodeimage.NPM + " ci "
	for _, c := range []struct {
		cert []byte
		ca   string
	}{{nil, pydeps.CABundle}, {[]byte("pem"), "/pack/" + registryCertName}} {
		in.CertPEM = c.cert
		s := in.script()
		for _, want := range []string{wrap, " --registry https://registry.npmjs.org/ ", " --proxy http://127.0.0.1:3129 --https-proxy http://127.0.0.1:3129 ", " --cafile " + c.ca + " ", " --fetch-retries 0"} {
			if !strings.Contains(s, want) {
				t.Errorf("registry script lacks %q:\n%s", want, s)
			}
		}
		if strings.Contains(s, "--offline") || strings.Contains(s, "--maxsockets") {
			t.Errorf("registry script:\n%s", s)
		}
	}
}
