package test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The same server-memory as node_test.go, shipped locked (package.json and
// package-lock.json, no node_modules) and installed at `agentnode install`
// by npm ci inside the sandbox, offline from an npm cache.

// lockedLauncher starts the server from the tree agentnode installs into
// the package's .deps.
const lockedLauncher = `process.env.MEMORY_FILE_PATH = process.cwd() + "/memory.jsonl";
await import("./.deps/node_modules/@modelcontextprotocol/server-memory/dist/index.js");
`

// lockedMemoryPackage locks server-memory with the host's npm (scripts
// off) in a scratch directory whose npm cache, cache, it fills, and copies
// package.json and package-lock.json (not node_modules) into a new package
// directory with the launcher and the manifest; it returns the package.
func lockedMemoryPackage(t testing.TB, dir, cache string) string {
	t.Helper()
	_, npm := requireNPM(t)
	scratch := filepath.Join(dir, "npm-scratch")
	pkg := filepath.Join(dir, "memory-mcp-locked")
	for _, d := range []string{scratch, pkg} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(scratch, "package.json"), []byte(`{"private": true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// npm's default lock shape (tarball URLs in "resolved"), whatever the
	// machine's npmrc says.
	cmd := exec.Command(npm, "install", "--ignore-scripts", "--no-audit", "--no-fund", "--save-exact",
		"--omit-lockfile-registry-resolved=false", "--cache", cache, "@modelcontextprotocol/server-memory@"+serverMemoryVersion)
	cmd.Dir = scratch
	if out, err := cmd.CombinedOutput(); err != nil {
		if os.Getenv("AGENTNODE_REQUIRE_NODE") == "1" {
			t.Fatalf("npm install: %v\n%s", err, out)
		}
		t.Skipf("npm install (the npm registry is needed): %v\n%s", err, out)
	}
	for _, name := range []string{"package.json", "package-lock.json"} {
		data, err := os.ReadFile(filepath.Join(scratch, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	manifest := strings.Replace(memoryManifest, "preinstalled with npm.", "locked, installed by agentnode.", 1)
	for name, body := range map[string]string{"server.mjs": lockedLauncher, "agentnode.yaml": manifest} {
		if err := os.WriteFile(filepath.Join(pkg, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The sandbox user reads the cache.
	if err := exec.Command("chmod", "-R", "a+rX", cache).Run(); err != nil {
		t.Fatal(err)
	}
	return pkg
}

// installFails runs `agentnode install args...` and requires exit 2 with
// all of want in its output.
func (e *mcpEnv) installFails(t *testing.T, want []string, args ...string) {
	t.Helper()
	cmd := e.command(append([]string{"install"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	all := string(out) + stderr.String()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 {
		t.Fatalf("install %v: %v, want exit 2\n%s", args, err, all)
	}
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Fatalf("install %v: no %q in\n%s", args, w, all)
		}
	}
}

// TestNPMInstallFromCache: server-memory shipped locked is refused
// without an npm cache and without sandbox.node_installer_image; with
// both it is installed by npm ci in the libcontainer sandbox, offline
// (the sandbox has no network), its tree sealed as deps_hash in
// agentnode.lock; create_entities and read_graph run sandboxed answer
// what the installed package run directly with the host's node answers;
// a file of the installed tree changed afterwards stops the next run.
// Locks that are not pinned, lack integrity or need an install script are
// refused before anything runs.
func TestNPMInstallFromCache(t *testing.T) {
	requireNPM(t)
	requireRoot(t)
	e := newMCPEnv(t)
	cache := filepath.Join(e.dir, "npm-cache")
	pkg := lockedMemoryPackage(t, e.dir, cache)
	e.cli(t, "setup")
	e.cli(t, "config", "set", "trust.minimum_trust_level", "unknown")
	e.cli(t, "config", "set", "guard.rate_limits.memory-mcp", `{"per_minute":100000,"per_hour":1000000,"burst":10000}`)
	e.cli(t, "sandbox", "build")

	e.installFails(t, []string{"--npm-cache DIR"}, pkg)
	cmd := e.command("install", pkg, "--npm-cache", cache)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "agentnode sandbox build --node-installer") {
		t.Fatalf("no installer image: %v\n%s", err, out)
	}

	// Refusals read from the lock, before any sandbox.
	t.Run("refused locks", func(t *testing.T) {
		lockData, err := os.ReadFile(filepath.Join(pkg, "package-lock.json"))
		if err != nil {
			t.Fatal(err)
		}
		var lock map[string]any
		if err := json.Unmarshal(lockData, &lock); err != nil {
			t.Fatal(err)
		}
		variant := func(name string, change func(pkgs map[string]any), remove bool) string {
			dir := filepath.Join(t.TempDir(), name)
			if err := exec.Command("cp", "-R", pkg, dir).Run(); err != nil {
				t.Fatal(err)
			}
			if remove {
				if err := os.Remove(filepath.Join(dir, "package-lock.json")); err != nil {
					t.Fatal(err)
				}
				return dir
			}
			var l map[string]any
			_ = json.Unmarshal(lockData, &l)
			change(l["packages"].(map[string]any))
			b, _ := json.Marshal(l)
			if err := os.WriteFile(filepath.Join(dir, "package-lock.json"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		}
		sdk := "node_modules/@modelcontextprotocol/sdk"
		if _, ok := lock["packages"].(map[string]any)[sdk]; !ok {
			t.Fatalf("the lock has no %s", sdk)
		}
		for _, c := range []struct {
			name   string
			change func(map[string]any)
			remove bool
			want   string
		}{
			{"unlocked", nil, true, "no package-lock.json: an unlocked tree is not installed"},
			{"no-integrity", func(p map[string]any) { delete(p[sdk].(map[string]any), "integrity") }, false,
				"@modelcontextprotocol/sdk@"},
			{"script", func(p map[string]any) { p[sdk].(map[string]any)["hasInstallScript"] = true }, false,
				"needs an install script (hasInstallScript)"},
			{"other-version", func(p map[string]any) {
				p[""].(map[string]any)["dependencies"].(map[string]any)["@modelcontextprotocol/server-memory"] = "^" + serverMemoryVersion
			}, false, "the lock must depend on exactly that version"},
		} {
			dir := variant(c.name, c.change, c.remove)
			e.installFails(t, []string{c.want, "mcp_unpinned"}, dir, "--npm-cache", cache)
		}
	})

	e.cli(t, "sandbox", "build", "--node-installer")
	e.cli(t, "sandbox", "build", "--node")
	// A cache without one of the lock's tarballs: refused, naming it,
	// before npm runs.
	partial := filepath.Join(e.dir, "npm-cache-partial")
	if err := exec.Command("cp", "-R", cache, partial).Run(); err != nil {
		t.Fatal(err)
	}
	gone := "node_modules/@modelcontextprotocol/server-memory"
	var pinned struct {
		Packages map[string]struct{ Version, Integrity string } `json:"packages"`
	}
	if data, err := os.ReadFile(filepath.Join(pkg, "package-lock.json")); err != nil || json.Unmarshal(data, &pinned) != nil {
		t.Fatalf("the lock: %v", err)
	}
	digest, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(pinned.Packages[gone].Integrity, "sha512-"))
	if err != nil {
		t.Fatal(err)
	}
	h := hex.EncodeToString(digest)
	if err := os.Remove(filepath.Join(partial, "_cacache", "content-v2", "sha512", h[:2], h[2:4], h[4:])); err != nil {
		t.Fatalf("the cache does not hold server-memory's tarball where npm keeps it: %v", err)
	}
	e.installFails(t, []string{"not in the npm cache", "@modelcontextprotocol/server-memory@" + serverMemoryVersion}, pkg, "--npm-cache", partial)

	out := e.cli(t, "install", pkg, "--npm-cache", cache, "--json")
	var res struct {
		DepsHash     string   `json:"deps_hash"`
		Dependencies []string `json:"dependencies"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	want := "@modelcontextprotocol/server-memory@" + serverMemoryVersion
	found := false
	for _, d := range res.Dependencies {
		found = found || d == want
	}
	if !strings.HasPrefix(res.DepsHash, "sha256:") || !found {
		t.Fatalf("install: %s", out)
	}
	lockfile, err := os.ReadFile(filepath.Join(e.dir, "agentnode.lock"))
	if err != nil || !strings.Contains(string(lockfile), res.DepsHash) {
		t.Fatalf("agentnode.lock does not seal %s: %v\n%s", res.DepsHash, err, lockfile)
	}

	installed := installedContent(t, e, "memory-mcp")
	ws := workspace(t)
	memoryAgrees(t, e, ws, installed)

	// The attacker changes a file of the installed tree: refused before it runs.
	appendTo(t, filepath.Join(installed, ".deps/node_modules/@modelcontextprotocol/server-memory/dist/index.js"), "\nconsole.error('tampered');\n")
	run := e.command("run", "memory-mcp", "read_graph", "--input", "{}", "--workspace", ws, "--json")
	rout, err := run.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 || strings.Contains(string(rout), "tampered") ||
		!strings.Contains(string(rout), "deps") {
		t.Fatalf("a changed file of the installed tree: %v\n%s", err, rout)
	}

	// The same lock written with omit-lockfile-registry-resolved (no
	// "resolved" anywhere) installs the same tree.
	e.cli(t, "remove", "memory-mcp")
	bare := filepath.Join(e.dir, "memory-mcp-bare")
	if err := exec.Command("cp", "-R", pkg, bare).Run(); err != nil {
		t.Fatal(err)
	}
	var lock map[string]any
	lockData, err := os.ReadFile(filepath.Join(bare, "package-lock.json"))
	if err == nil {
		err = json.Unmarshal(lockData, &lock)
	}
	if err != nil {
		t.Fatal(err)
	}
	stripped := 0
	for _, v := range lock["packages"].(map[string]any) {
		if e, ok := v.(map[string]any); ok && e["resolved"] != nil {
			delete(e, "resolved")
			stripped++
		}
	}
	if stripped < 10 {
		t.Fatalf("the lock has %d resolved URLs: not npm's default shape", stripped)
	}
	lockData, _ = json.MarshalIndent(lock, "", "  ")
	if err := os.WriteFile(filepath.Join(bare, "package-lock.json"), lockData, 0o644); err != nil {
		t.Fatal(err)
	}
	var bareRes struct {
		DepsHash string `json:"deps_hash"`
	}
	if err := json.Unmarshal(e.cli(t, "install", bare, "--npm-cache", cache, "--json"), &bareRes); err != nil {
		t.Fatal(err)
	}
	if bareRes.DepsHash != res.DepsHash {
		t.Fatalf("without resolved URLs the tree is %s, with them %s", bareRes.DepsHash, res.DepsHash)
	}

	// From the npm registry instead, through the sealed egress proxy
	// allowing its host alone: the same tree, one audited tunnel per
	// tarball, never more than npmdeps.MaxTunnels at once, none refused.
	e.installFails(t, []string{"--npm-cache and --npm-registry exclude each other"}, pkg, "--npm-cache", cache, "--npm-registry", "https://registry.npmjs.org/")
	e.installFails(t, []string{"--npm-registry", "http is refused"}, pkg, "--npm-registry", "http://registry.npmjs.org/")
	e.installFails(t, []string{"--npm-cert needs --npm-registry"}, pkg, "--npm-cache", cache, "--npm-cert", "/etc/ssl/certs/ca-certificates.crt")
	e.cli(t, "remove", "memory-mcp")
	seq := lastAuditSeq(t, e)
	install, regOut := registryInstaller(t, e, pkg)
	if regOut == nil {
		seq = lastAuditSeq(t, e)
		regOut, _ = install(t, pkg)
	}
	var regRes struct {
		DepsHash string `json:"deps_hash"`
	}
	if err := json.Unmarshal(regOut, &regRes); err != nil {
		t.Fatal(err)
	}
	if regRes.DepsHash != res.DepsHash {
		t.Fatalf("from the registry the tree is %s, from the cache %s", regRes.DepsHash, res.DepsHash)
	}
	tun := egressTunnels(t, e, seq)
	tarballs := 0
	for name, p := range pinned.Packages {
		if name != "" && p.Integrity != "" {
			tarballs++
		}
	}
	// The forwarder lets the next connection in as soon as one of its 16
	// ends; the proxy records that tunnel's close only after, so its
	// records may show a few more open at once than the forwarder allows,
	// never anywhere near the unbounded ~99 (nor any refusal).
	if tun.allowed < tarballs || tun.closed != tun.allowed || len(tun.denied) > 0 || tun.maxOpen > 2*npmMaxTunnels || tun.otherHosts > 0 {
		t.Fatalf("the registry install's egress: %+v (want at least %d tunnels to registry.npmjs.org:443, each closed, at most %d open at once as the proxy records them, none refused)",
			tun, tarballs, 2*npmMaxTunnels)
	}
	auditOut := string(e.cli(t, "audit", "-n", "400", "--json"))
	if !regexp.MustCompile(`"event":"egress","request_id":"[0-9a-f]+","package":"memory-mcp".*"placement":"sandbox","backend":"libcontainer","decision":"allow","code":"","reason":"registry\.npmjs\.org:443: allowlisted host`).MatchString(auditOut) {
		t.Fatalf("no egress record of registry.npmjs.org:443 in the audit:\n%s", auditOut)
	}

	// A lock with one tarball on another host: refused by the proxy,
	// named in the error, nothing installed.
	e.cli(t, "remove", "memory-mcp")
	elsewhere := filepath.Join(e.dir, "memory-mcp-elsewhere")
	if err := exec.Command("cp", "-R", pkg, elsewhere).Run(); err != nil {
		t.Fatal(err)
	}
	lockData, err = os.ReadFile(filepath.Join(pkg, "package-lock.json"))
	if err == nil {
		err = json.Unmarshal(lockData, &lock)
	}
	if err != nil {
		t.Fatal(err)
	}
	zod := lock["packages"].(map[string]any)["node_modules/zod"].(map[string]any)
	zod["resolved"] = strings.Replace(zod["resolved"].(string), "https://registry.npmjs.org/", "https://registry.yarnpkg.com/", 1)
	lockData, _ = json.MarshalIndent(lock, "", "  ")
	if err := os.WriteFile(filepath.Join(elsewhere, "package-lock.json"), lockData, 0o644); err != nil {
		t.Fatal(err)
	}
	seq = lastAuditSeq(t, e)
	out, err = install(t, elsewhere, "fail")
	if !strings.Contains(string(out), "refused: registry.yarnpkg.com:443: host not in the allowlist") || !strings.Contains(string(out), "nothing was installed") {
		t.Fatalf("a tarball on another host: %v\n%s", err, out)
	}
	if got := e.cli(t, "list", "--json"); strings.Contains(string(got), "memory-mcp") {
		t.Fatalf("memory-mcp installed after a refusal: %s", got)
	}
	if d := egressTunnels(t, e, seq).denied; len(d) != 1 || !strings.Contains(d[0], "registry.yarnpkg.com:443: host not in the allowlist") {
		t.Fatalf("the refusal's audit: %q", d)
	}

	t.Logf("installed %d npm packages, %s (the same with %d resolved URLs removed, and from the registry: %d tunnels, at most %d open at once, %d bytes in); sandboxed and direct agree; tampered tree refused: %s",
		len(res.Dependencies), res.DepsHash, stripped, tun.allowed, tun.maxOpen, tun.bytesIn, strings.TrimSpace(string(rout)))
}

// installedContent is the store's copy of package id.
func installedContent(t testing.TB, e *mcpEnv, id string) string {
	t.Helper()
	dir := filepath.Join(e.home(), "packages", id, "content")
	if _, err := os.Stat(filepath.Join(dir, "agentnode.yaml")); err != nil {
		t.Fatalf("no installed %s: %v", id, err)
	}
	return dir
}

// npmMaxTunnels is npmdeps.MaxTunnels (the test module does not import
// cmd/): the most tunnels npm may hold open at once.
const npmMaxTunnels = 16

// registryInstaller returns how this machine installs pkg from
// https://registry.npmjs.org: with the release agentnode, whose proxy
// refuses a registry name resolving to a non-public address. Behind a
// TLS-intercepting egress (CI sandboxes) the name resolves to such an
// address and the certificate comes from a CA only the host's bundle
// holds: the release install's refusal, naming the addresses, is checked,
// and installs then run the egresstest agentnode, whose proxy permits
// those addresses alone (AGENTNODE_EGRESSTEST_PERMIT), with --npm-cert
// naming the host's bundle. The returned function runs the install with
// --json; with want "fail" it returns the output of a run that must exit 2.
// The output is the release build's, when it installed pkg.
func registryInstaller(t *testing.T, e *mcpEnv, pkg string) (func(t *testing.T, dir string, want ...string) ([]byte, error), []byte) {
	t.Helper()
	// run returns stdout (the JSON answer) of a run that succeeded, and
	// stdout and stderr of one that failed.
	run := func(cmd *exec.Cmd, t *testing.T, want []string) ([]byte, error) {
		t.Helper()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			out = append(out, stderr.Bytes()...)
		}
		if len(want) > 0 {
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
				t.Fatalf("%v: %v, want exit 2\n%s", cmd.Args, err, out)
			}
			return out, err
		}
		if err != nil {
			unreachable := regexp.MustCompile(`cannot resolve|cannot connect|ENOTFOUND|ECONNREFUSED|ETIMEDOUT`)
			if unreachable.Match(out) {
				t.Fatalf("the npm registry cannot be reached from this machine through the egress proxy: %v\n%s", err, out)
			}
			t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
		}
		return out, err
	}
	args := func(dir string, extra ...string) []string {
		return append([]string{"install", dir, "--npm-registry", "https://registry.npmjs.org", "--json"}, extra...)
	}
	cmd := e.command(args(pkg)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		out = append(out, stderr.Bytes()...)
	}
	nonPublic := regexp.MustCompile(`registry\.npmjs\.org:443: resolves to a non-public address: ([0-9a-f.:]+) is not public`).FindAllSubmatch(out, -1)
	if err == nil || len(nonPublic) == 0 {
		if err != nil {
			run(e.command(args(pkg)...), t, nil) // fails with its output
		}
		return func(t *testing.T, dir string, want ...string) ([]byte, error) {
			return run(e.command(args(dir)...), t, want)
		}, out
	}
	if strings.Contains(string(out), "allowlisted host") || !strings.Contains(string(out), "nothing was installed") {
		t.Fatalf("the release proxy's refusal of a non-public address: %s", out)
	}
	permit := map[string]bool{}
	for _, m := range nonPublic {
		permit[string(m[1])] = true
	}
	var addrs []string
	for a := range permit {
		addrs = append(addrs, a)
	}
	t.Logf("registry.npmjs.org resolves to %v here (not public: refused by the release proxy); installing with the egresstest proxy permitting them and --npm-cert %s", addrs, hostCABundle)
	return func(t *testing.T, dir string, want ...string) ([]byte, error) {
		cmd := exec.Command(filepath.Join(extraDir, "egresstest", "agentnode"), args(dir, "--npm-cert", hostCABundle)...)
		cmd.Env = append(slices.Clone(e.env), "AGENTNODE_EGRESSTEST_PERMIT="+strings.Join(addrs, ","))
		cmd.Dir = e.dir
		return run(cmd, t, want)
	}, nil
}

// hostCABundle is the host's certificate bundle (Debian's path).
const hostCABundle = "/etc/ssl/certs/ca-certificates.crt"

// lastAuditSeq is the seq of the last audit record.
func lastAuditSeq(t testing.TB, e *mcpEnv) float64 {
	t.Helper()
	var last float64
	for _, r := range e.allAuditRecords(t) {
		last = max(last, r["seq"].(float64))
	}
	return last
}

// tunnels sums a registry install's egress records.
type tunnels struct {
	allowed, closed, maxOpen, otherHosts int
	bytesIn                              int64
	denied                               []string
}

// egressTunnels reads the egress records of memory-mcp after seq, in
// order: tunnels allowed to registry.npmjs.org:443 and closed, the most
// open at once as the proxy reported them (each allow is recorded before
// the proxy dials, each close after the tunnel ended), the bytes received,
// and the refusals.
func egressTunnels(t testing.TB, e *mcpEnv, seq float64) tunnels {
	t.Helper()
	var tun tunnels
	open := 0
	in := regexp.MustCompile(`; \d+ bytes out, (\d+) bytes in`)
	for _, r := range e.allAuditRecords(t) {
		if r["seq"].(float64) <= seq || r["package"] != "memory-mcp" {
			continue
		}
		why, _ := r["reason"].(string)
		switch {
		case r["event"] == "egress" && r["decision"] == "deny":
			tun.denied = append(tun.denied, why)
		case !strings.HasPrefix(why, "registry.npmjs.org:443: "):
			if r["event"] == "egress" || r["event"] == "egress_closed" {
				tun.otherHosts++
			}
		case r["event"] == "egress":
			tun.allowed++
			open++
			tun.maxOpen = max(tun.maxOpen, open)
		case r["event"] == "egress_closed":
			tun.closed++
			open--
			if m := in.FindStringSubmatch(why); m != nil {
				n, _ := strconv.ParseInt(m[1], 10, 64)
				tun.bytesIn += n
			}
		}
	}
	return tun
}
