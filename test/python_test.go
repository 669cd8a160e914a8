package test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentnode/agentnode/kernel/hashcache"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// pyPacks is sdk/python/testdata: the Python runtime's test packages,
// shaped like AgentNode's starter packs.
func pyPacks() string { return filepath.Join(repoRoot(), "sdk", "python", "testdata") }

// copyPack copies the test package name into dir and returns its path.
func copyPack(t testing.TB, dir, name string) string {
	t.Helper()
	dst := filepath.Join(dir, name)
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(pyPacks(), name))); err != nil {
		t.Fatal(err)
	}
	return dst
}

// needHostPython skips (or, with AGENTNODE_REQUIRE_PYTHON=1, fails) without
// Debian's python3.
func needHostPython(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		if os.Getenv("AGENTNODE_REQUIRE_PYTHON") == "1" {
			t.Fatalf("AGENTNODE_REQUIRE_PYTHON=1 but /usr/bin/python3: %v", err)
		}
		t.Skipf("/usr/bin/python3: %v", err)
	}
}

// pySandboxEnv sets agentnode up with the default and the Python runtime
// image and probe-pack of unknown trust, which therefore runs only in the
// libcontainer sandbox.
func pySandboxEnv(t testing.TB, e *mcpEnv) *mcpEnv {
	t.Helper()
	needHostPython(t)
	requireRoot(t)
	e.cli(t, "setup")
	e.cli(t, "sandbox", "build", "--python")
	e.cli(t, "config", "set", "trust.minimum_trust_level", "unknown")
	e.cli(t, "config", "set", "guard.unknown", "allow")
	e.cli(t, "config", "set", "guard.rate_limits.probe-pack", `{"per_minute":100000,"per_hour":1000000,"burst":10000}`)
	e.cli(t, "install", copyPack(t, e.dir, "probe-pack"))
	return e
}

// directResponse is the response of module:function of the package at
// pack called directly in Python (testdata/pycheck.py --direct), as
// {"error","ok","result"}.
func directResponse(t testing.TB, pack, entrypoint, input string) map[string]any {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", filepath.Join(repoRoot(), "test", "testdata", "pycheck.py"),
		"--direct", pack, entrypoint, input).Output()
	if err != nil {
		t.Fatalf("direct call of %s: %v", entrypoint, err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// `agentnode mcp serve` exposes runtime: python tools like exec tools: listed
// under package__tool, each call through the pipeline into the Python image
// in the sandbox, answering what the function answers called directly; an
// exception is an MCP tool error "Type: message".
func TestMCPServePython(t *testing.T) {
	e := pySandboxEnv(t, newMCPEnv(t))
	cs, _, stderr := e.serve(t, nil)
	names := map[string]bool{}
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		names[tl.Name] = true
	}
	for _, n := range []string{"probe-pack__word_count", "probe-pack__slow_echo", "probe-pack__explode"} {
		if !names[n] {
			t.Fatalf("%s not listed: %v", n, names)
		}
	}
	pack := filepath.Join(e.dir, "probe-pack")
	for _, c := range []struct{ tool, ep, input string }{
		{"word_count", "probe_pack.tool:word_count", `{"text":"one three fives"}`},
		{"slow_echo", "probe_pack.tool:slow_echo", `{"value":{"k":[1,"\u00e9",null]},"delay":0.01}`},
	} {
		var args map[string]any
		if err := json.Unmarshal([]byte(c.input), &args); err != nil {
			t.Fatal(err)
		}
		r := callTool(t, cs, "probe-pack__"+c.tool, args)
		if r.IsError || r.Meta["agentnode/placement"] != "sandbox" {
			t.Fatalf("%s: isError=%v %q meta %v\nstderr: %s", c.tool, r.IsError, resultText(r), r.Meta, stderr)
		}
		var got any
		if err := json.Unmarshal([]byte(resultText(r)), &got); err != nil {
			t.Fatalf("%s: %q: %v", c.tool, resultText(r), err)
		}
		want := directResponse(t, pack, c.ep, c.input)
		if want["ok"] != true || !reflect.DeepEqual(got, want["result"]) {
			t.Fatalf("%s over MCP: %v, called directly: %v", c.tool, got, want)
		}
	}
	r := callTool(t, cs, "probe-pack__explode", map[string]any{"message": "bad input"})
	want := directResponse(t, pack, "probe_pack.tool:explode", `{"message":"bad input"}`)
	if !r.IsError || !strings.Contains(resultText(r), "ValueError: bad input") || want["error"] != "ValueError: bad input" {
		t.Fatalf("explode: isError=%v %q (direct: %v)", r.IsError, resultText(r), want)
	}
}

var (
	pyBenchMu                   sync.Mutex
	pyBenchSandbox, pyBenchHost *mcpEnv
)

// A file of the Python image's rootfs changed after a verification that
// cached its digest (kernel/hashcache, image.HashCachePath) is caught on
// the next run: the attacker rewrites the standard library's compiled
// json module in place, same size, and puts its times back, and the run is
// refused with image_digest_mismatch before anything executes.
func TestPythonImageTamperAfterCachedVerification(t *testing.T) {
	e := pySandboxEnv(t, newMCPEnv(t))
	ref := strings.TrimSpace(string(e.cli(t, "config", "get", "sandbox.python_image")))
	_, mhex, err := image.ParseRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	rootfs := image.RootfsDir(e.home(), mhex)
	pycs, err := filepath.Glob(filepath.Join(rootfs, "usr", "lib", "python3.*", "json", "__pycache__", "__init__.*.pyc"))
	if err != nil || len(pycs) != 1 {
		t.Fatalf("the image's compiled json module: %v %v", pycs, err)
	}
	target := pycs[0]
	// Only files unchanged for hashcache.Settle are cached: wait until the
	// unpacked files have settled.
	fi, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(ctime(t, target).Add(hashcache.Settle + 100*time.Millisecond)))
	const input = `{"text":"one three fives"}`
	if out := e.cli(t, "run", "probe-pack", "word_count", "--input", input, "--json"); !bytes.Contains(out, []byte(`"words":3`)) {
		t.Fatalf("run before the tampering: %s", out)
	}
	if _, ok := hashcache.Read(image.HashCachePath(e.home(), mhex))[target]; !ok {
		t.Fatalf("the run did not cache the digest of %s", target)
	}

	// The attacker: new bytes, the same size, the old times.
	data, err := os.ReadFile(target)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	f, err := os.OpenFile(target, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(target, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}

	cmd := e.command("run", "probe-pack", "word_count", "--input", input, "--json")
	out, err := cmd.Output()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("run after the tampering: %v\n%s", err, out)
	}
	var res struct {
		Decision, Code, Reason string
		Ran                    bool
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if res.Decision != "deny" || res.Code != "image_digest_mismatch" || res.Ran || !strings.Contains(res.Reason, "was modified") {
		t.Fatalf("run after the tampering: %s", out)
	}
}

// ctime is the status change time of p.
func ctime(t testing.TB, p string) time.Time {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return time.Unix(st.Ctim.Unix())
}

// BenchmarkPythonTool compares, side by side in one run, one call of a
// trivial runtime: python tool (probe-pack's word_count) through
// `agentnode run` sandboxed (libcontainer, the Python image) and on the host
// (curated, confined; needs the keychain: test/keyring.sh) with `python3 -c`
// importing and calling the same function directly. Each iteration makes
// the three calls one after the other, so a loaded machine weighs on all
// three alike; the metrics are each one's median and p90 (sideBySide).
func BenchmarkPythonTool(b *testing.B) {
	needHostPython(b)
	requireKeyring(b)
	const input = `{"text":"one three fives"}`
	pyBenchMu.Lock()
	if pyBenchSandbox == nil {
		dir, err := os.MkdirTemp(filepath.Dir(binDir), "py-bench-")
		if err != nil {
			b.Fatal(err)
		}
		pyBenchSandbox = pySandboxEnv(b, newMCPEnvIn(dir))
	}
	if pyBenchHost == nil {
		dir, err := os.MkdirTemp(filepath.Dir(binDir), "py-bench-host-")
		if err != nil {
			b.Fatal(err)
		}
		e := newMCPEnvIn(dir)
		e.cli(b, "setup")
		e.cli(b, "config", "set", "guard.unknown", "allow")
		e.cli(b, "config", "set", "guard.rate_limits.probe-pack", `{"per_minute":100000,"per_hour":1000000,"burst":10000}`)
		keyID := "py-bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		e.cli(b, "trust", "keygen", "--id", keyID)
		p := copyPack(b, e.dir, "probe-pack")
		att := filepath.Join(e.dir, "att.json")
		if err := os.WriteFile(att, e.cli(b, "trust", "attest", p, "--level", "curated", "--key", keyID), 0o644); err != nil {
			b.Fatal(err)
		}
		e.cli(b, "install", p, "--attestation", att)
		pyBenchHost = e
	}
	sb, host := pyBenchSandbox, pyBenchHost
	pyBenchMu.Unlock()
	code := "import sys; sys.path.insert(0, " + strconv.Quote(filepath.Join(sb.dir, "probe-pack", "src")) + ")\n" +
		"import json; from probe_pack.tool import word_count\n" +
		"print(json.dumps(word_count(**json.loads(sys.argv[1]))))"
	direct := func() {
		out, err := exec.Command("/usr/bin/python3", "-c", code, input).Output()
		if err != nil || !bytes.Contains(out, []byte(`"words": 3`)) {
			b.Fatalf("%s: %v", out, err)
		}
	}
	run := func(e *mcpEnv, placement string) func() {
		return func() {
			out := e.cli(b, "run", "probe-pack", "word_count", "--input", input, "--json")
			if !bytes.Contains(out, []byte(`"words":3`)) || !bytes.Contains(out, []byte(`"placement":"`+placement+`"`)) {
				b.Fatalf("output %s", out)
			}
		}
	}
	// The steady state: the image's files have settled, so the warm-up
	// call caches their digests (kernel/hashcache).
	ref := strings.TrimSpace(string(sb.cli(b, "config", "get", "sandbox.python_image")))
	_, mhex, err := image.ParseRef(ref)
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Until(ctime(b, image.RootfsDir(sb.home(), mhex)).Add(hashcache.Settle + 100*time.Millisecond)))
	sideBySide(b, []variant{{"direct", direct}, {"host", run(host, "host")}, {"sandbox", run(sb, "sandbox")}})
}

// TestConformancePythonImage runs the sandbox conformance and escape suite
// (sdk/sandbox/sandboxtest) on the libcontainer plugin with the Python
// runtime image instead of the default one: the profile holds the same with
// python3 and its libraries in the rootfs.
func TestConformancePythonImage(t *testing.T) {
	e := pySandboxEnv(t, newMCPEnv(t))
	ref := strings.TrimSpace(string(e.cli(t, "config", "get", "sandbox.python_image")))
	img, err := image.Resolve(e.home(), ref)
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.Run(t, sandboxtest.LaunchPlugin(t, filepath.Join(binDir, "agentnode-sandbox-libcontainer")),
		sandboxtest.Config{Image: img.Ref, ImageStore: img.Store})
}
