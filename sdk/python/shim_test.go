package python

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hostPython is Debian's interpreter, the one the Python runtime image is
// built from (never a pyenv shim found first on PATH).
const hostPython = "/usr/bin/python3"

// direct calls module:function of the package at pack with input the way
// AgentNode's SDK does in-process, without the shim: the same sys.path
// (stdlib, src/, the root, .deps), func(**input), a coroutine awaited,
// the SDK's fallback for a result JSON cannot hold, "Type: message" for
// anything raised. It answers on descriptor 3, so what the tool prints
// cannot mix into it.
const direct = `
import asyncio, importlib, json, os, site, sys
pack, module, name, inp = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
if os.path.isdir(os.path.join(pack, "src")):
    sys.path.append(os.path.join(pack, "src"))
sys.path.append(pack)
if os.path.isdir(os.path.join(pack, ".deps")):
    site.addsitedir(os.path.join(pack, ".deps"))
try:
    result = getattr(importlib.import_module(module), name)(**inp)
    if asyncio.iscoroutine(result):
        result = asyncio.run(result)
    try:
        out = json.dumps({"ok": True, "result": result}, allow_nan=False)
    except (TypeError, ValueError):
        out = json.dumps({"ok": True, "result": {"__agentnode_fallback_repr__": True, "repr": repr(result)[:2000]}})
except BaseException as e:
    out = json.dumps({"ok": False, "error": type(e).__name__ + ": " + str(e)})
with os.fdopen(3, "w") as f:
    f.write(out + "\n")
`

func needPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(hostPython); err != nil {
		// In CI (AGENTNODE_REQUIRE_PYTHON=1) a missing python3 fails.
		if os.Getenv("AGENTNODE_REQUIRE_PYTHON") == "1" {
			t.Fatalf("AGENTNODE_REQUIRE_PYTHON=1 but %s: %v (Debian's python3-minimal)", hostPython, err)
		}
		t.Skipf("%s: %v (Debian's python3-minimal)", hostPython, err)
	}
}

// packs copies testdata into a fresh directory, so that a bytecode file or
// any other write by a run would show.
func packs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// shimFile writes the embedded shim, as the host and the image get it.
func shimFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agentnode_tool.py")
	if err := os.WriteFile(p, Shim, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type shimRun struct {
	stdout, stderr string
	exit           int
}

func runShim(t *testing.T, argv []string, env []string, request string) shimRun {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = t.TempDir()
	// The host executor's environment (specs/toolio.md), plus env.
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, env...)
	cmd.Stdin = strings.NewReader(request)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%v: %v", argv, err)
	}
	return shimRun{out.String(), errb.String(), cmd.ProcessState.ExitCode()}
}

// callDirect is the expected response: the function called by direct.
func callDirect(t *testing.T, pack, entrypoint, input string) string {
	t.Helper()
	module, name, ok := strings.Cut(entrypoint, ":")
	if !ok {
		name = "run"
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(hostPython, "-I", "-S", "-B", "-c", direct, pack, module, name, input)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.ExtraFiles = []*os.File{w}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("direct call of %s: %v\n%s", entrypoint, err, stderr.String())
	}
	return buf.String()
}

func request(t *testing.T, tool, input string) string {
	t.Helper()
	// The request as the host writes it (specs/toolio.md): one compact line.
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(input)); err != nil {
		t.Fatal(err)
	}
	name, _ := json.Marshal(tool)
	return `{"tool":` + string(name) + `,"input":` + buf.String() + "}\n"
}

// checkResponse requires out to be one line holding a response the host
// accepts.
// response is the tool I/O response (specs/toolio.md).
type response struct {
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
}

func checkResponse(t *testing.T, out string) *response {
	t.Helper()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("stdout is not one line: %q", out)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	var resp response
	if err := dec.Decode(&resp); err != nil {
		t.Fatalf("stdout %q: %v", out, err)
	}
	if resp.OK == (resp.Error != "") || !resp.OK && resp.Result != nil {
		t.Fatalf("stdout %q is not a valid response", out)
	}
	return &resp
}

// TestShimMatchesDirectCall runs tools of the test packages (ANP 0.1 and
// 0.2, src/ and flat layouts, a dependency in .deps) through the shim and
// requires byte for byte the response the function gives when called
// directly.
func TestShimMatchesDirectCall(t *testing.T) {
	needPython(t)
	dir := packs(t)
	shim := shimFile(t)
	cases := []struct {
		name, pack, entrypoint, input string
		ok                            bool
		stderr                        []string // lines the tool printed, now on stderr
	}{
		// ANP 0.1: the package-level entrypoint's run.
		{"anp01 run", "text-stats-pack", "text_stats_pack.tool", `{"text":"a b a\nc a","top":2}`, true, nil},
		{"anp01 default argument", "text-stats-pack", "text_stats_pack.tool", `{"text":"x"}`, true, nil},
		// ANP 0.2: per-tool module:function.
		{"anp02 sync", "probe-pack", "probe_pack.tool:word_count", `{"text":"one three fives"}`, true, nil},
		{"anp02 package run", "probe-pack", "probe_pack.tool", `{"text":"a bb"}`, true, nil},
		{"async", "probe-pack", "probe_pack.tool:slow_echo", `{"value":{"k":[1,"\u00e9",null]},"delay":0.01}`, true, nil},
		{"prints", "probe-pack", "probe_pack.tool:chatty", `{"n":2}`, true, []string{
			"print line 0", "print line 1", "sys.stdout.write", "sys.__stdout__.write", "os.write(1)", "child process stdout",
		}},
		{"raises", "probe-pack", "probe_pack.tool:explode", `{"message":"bad \"input\" \u2603"}`, false, nil},
		{"datetime result", "probe-pack", "probe_pack.tool:stamp", `{}`, true, nil},
		{"set result", "probe-pack", "probe_pack.tool:tags", `{}`, true, nil},
		{"NaN result", "probe-pack", "probe_pack.tool:not_a_number", `{}`, true, nil},
		{"sys.exit", "probe-pack", "probe_pack.tool:leave", `{"code":3}`, false, nil},
		{"unexpected argument", "probe-pack", "probe_pack.tool:word_count", `{"text":"a","extra":1}`, false, nil},
		{"missing argument", "probe-pack", "probe_pack.tool:word_count", `{}`, false, nil},
		{"dependency not installed", "probe-pack", "probe_pack.broken:run", `{}`, false, nil},
		{"raises on import", "probe-pack", "probe_pack.fails_on_import:run", `{}`, false, nil},
		// Flat layout, a dependency in .deps and one on a .pth path there.
		{"flat layout with .deps", "flat-notes-pack", "flat_notes_pack.tool:format_note", `{"title":"Hello, World!","body":" b ","z":1}`, true, nil},
		{"flat package run", "flat-notes-pack", "flat_notes_pack.tool", `{"title":"T"}`, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pack := filepath.Join(dir, tc.pack)
			want := callDirect(t, pack, tc.entrypoint, tc.input)
			got := runShim(t, Command(hostPython, shim, pack, tc.entrypoint, false), nil, request(t, "tool", tc.input))
			if got.exit != 0 {
				t.Fatalf("exit %d, stderr:\n%s", got.exit, got.stderr)
			}
			if got.stdout != want {
				t.Fatalf("shim answered\n%s\ndirect call gives\n%s\nstderr:\n%s", got.stdout, want, got.stderr)
			}
			if resp := checkResponse(t, got.stdout); resp.OK != tc.ok {
				t.Fatalf("ok = %v, want %v: %s", resp.OK, tc.ok, got.stdout)
			}
			for _, line := range tc.stderr {
				if !strings.Contains(got.stderr, line+"\n") {
					t.Errorf("stderr lacks %q:\n%s", line, got.stderr)
				}
			}
		})
	}
	// No run wrote anything into the packages (no bytecode).
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (d.Name() == "__pycache__" || strings.HasSuffix(p, ".pyc")) {
			t.Errorf("a run wrote %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestShimErrors covers what only the shim decides: how an entrypoint is
// resolved and refused, and requests and invocations it refuses. Every
// answer is still one response line the host accepts.
func TestShimErrors(t *testing.T) {
	needPython(t)
	dir := packs(t)
	shim := shimFile(t)
	probe := filepath.Join(dir, "probe-pack")
	stats := filepath.Join(dir, "text-stats-pack")
	cases := []struct {
		name    string
		argv    []string
		request string
		want    string
	}{
		{"no such function", Command(hostPython, shim, probe, "probe_pack.tool:nope", false), `{"tool":"t","input":{}}`,
			`{"ok": false, "error": "ImportError: Function 'nope' not found in module 'probe_pack.tool'"}`},
		{"invalid entrypoint", Command(hostPython, shim, probe, "probe_pack/tool.py", false), `{"tool":"t","input":{}}`,
			`{"ok": false, "error": "ValueError: invalid entrypoint 'probe_pack/tool.py': want module.path or module.path:function"}`},
		{"no such package directory", Command(hostPython, shim, filepath.Join(dir, "nope"), "m", false), `{"tool":"t","input":{}}`,
			`{"ok": false, "error": "FileNotFoundError: package directory ` + filepath.Join(dir, "nope") + ` does not exist"}`},
		{"input not an object", Command(hostPython, shim, probe, "probe_pack.tool", false), `{"tool":"t","input":[1]}`,
			`{"ok": false, "error": "ValueError: request input is not a JSON object"}`},
		{"no tool name", Command(hostPython, shim, probe, "probe_pack.tool", false), `{"input":{}}`,
			`{"ok": false, "error": "ValueError: request has no tool name"}`},
		{"without -I -S", []string{hostPython, "-B", shim, probe, "probe_pack.tool"}, `{"tool":"t","input":{}}`,
			`{"ok": false, "error": "RuntimeError: agentnode_tool.py must run under python3 -I -S"}`},
		// The SDK's resolution of a tool without its own entrypoint: a
		// function named like the tool, else the entrypoint's function.
		{"package-level entrypoint, tool function", Command(hostPython, shim, probe, "probe_pack.tool", true), `{"tool":"word_count","input":{"text":"x yy"}}`,
			callDirect(t, probe, "probe_pack.tool:word_count", `{"text":"x yy"}`)},
		{"package-level entrypoint, run", Command(hostPython, shim, stats, "text_stats_pack.tool", true), `{"tool":"text_stats","input":{"text":"x"}}`,
			callDirect(t, stats, "text_stats_pack.tool", `{"text":"x"}`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := runShim(t, tc.argv, nil, tc.request)
			if got.exit != 0 {
				t.Fatalf("exit %d, stderr:\n%s", got.exit, got.stderr)
			}
			if want := strings.TrimSuffix(tc.want, "\n") + "\n"; got.stdout != want {
				t.Fatalf("got  %swant %s", got.stdout, want)
			}
			checkResponse(t, got.stdout)
		})
	}
}

// TestShimIsolation: the package sees the standard library, its own code
// and its .deps, nothing of the host's site-packages or PYTHONPATH.
func TestShimIsolation(t *testing.T) {
	needPython(t)
	dir := packs(t)
	shim := shimFile(t)
	probe := filepath.Join(dir, "probe-pack")

	// PYTHONPATH pointing at a module named like the .deps dependency is
	// ignored (-I).
	evil := t.TempDir()
	if err := os.WriteFile(filepath.Join(evil, "tinydep.py"), []byte("raise SystemExit('PYTHONPATH was read')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	flat := filepath.Join(dir, "flat-notes-pack")
	input := `{"title":"A B"}`
	got := runShim(t, Command(hostPython, shim, flat, "flat_notes_pack.tool:format_note", false),
		[]string{"PYTHONPATH=" + evil, "PYTHONSTARTUP=" + filepath.Join(evil, "tinydep.py")}, request(t, "format_note", input))
	if want := callDirect(t, flat, "flat_notes_pack.tool:format_note", input); got.stdout != want {
		t.Fatalf("with PYTHONPATH set: got %s want %s", got.stdout, want)
	}

	// A module of the host's site-packages: the control shows the host
	// interpreter has it, the shim must not let the package see it.
	for _, mod := range []string{"yaml", "apt", "six", "setuptools", "pip"} {
		if err := exec.Command(hostPython, "-c", "import "+mod).Run(); err != nil {
			continue
		}
		input := `{"name":"` + mod + `"}`
		got := runShim(t, Command(hostPython, shim, probe, "probe_pack.tool:import_module", false), nil, request(t, "t", input))
		want := `{"ok": false, "error": "ModuleNotFoundError: No module named '` + mod + `'"}` + "\n"
		if got.stdout != want {
			t.Fatalf("host site-packages module %s: got %s want %s", mod, got.stdout, want)
		}
		return
	}
	t.Skip("the host's python3 has none of yaml, apt, six, setuptools, pip in site-packages: nothing to hide")
}

// TestCommand pins the argv the host runs.
func TestCommand(t *testing.T) {
	got := Command(Interpreter, ShimPath, "/pack", "m.tool:f", false)
	want := []string{"/usr/bin/python3", "-I", "-S", "-B", "/usr/lib/agentnode/agentnode_tool.py", "/pack", "m.tool:f"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("Command = %q, want %q", got, want)
	}
	got = Command(Interpreter, ShimPath, "/pack", "m.tool", true)
	if got[5] != "--package-entrypoint" || got[6] != "/pack" || len(got) != 8 {
		t.Fatalf("Command(packageLevel) = %q", got)
	}
}

// TestImageCommand runs the launcher ImageCommand gives (the image's shim
// directory moved to a temporary one with the same layout): with the
// shim's bytecode present (an unchecked hash-based .pyc, as the image
// holds), the shim loads from it instead of being compiled, and answers as
// the script does; the package sees neither the shim's directory on
// sys.path nor its module, even one of its own named agentnode_tool.
func TestImageCommand(t *testing.T) {
	needPython(t)
	dir := filepath.Join(t.TempDir(), "usr", "lib", "agentnode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ShimName), Shim, 0o644); err != nil {
		t.Fatal(err)
	}
	compile := exec.Command(hostPython, "-I", "-S", "-c",
		"import py_compile, sys; py_compile.compile(sys.argv[1], invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH, doraise=True)",
		filepath.Join(dir, ShimName))
	if out, err := compile.CombinedOutput(); err != nil {
		t.Fatalf("compile the shim: %v\n%s", err, out)
	}
	pack := filepath.Join(t.TempDir(), "pack")
	if err := os.MkdirAll(pack, 0o755); err != nil {
		t.Fatal(err)
	}
	probe := "import sys\n" +
		"def probe():\n" +
		"    import agentnode_tool\n" +
		"    return {'own': agentnode_tool.OWN, 'path': [p for p in sys.path if 'agentnode' in p and p.endswith('agentnode')]}\n"
	for name, src := range map[string]string{"probe.py": probe, "agentnode_tool.py": "OWN = True\n"} {
		if err := os.WriteFile(filepath.Join(pack, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	argv := ImageCommand(pack, "probe:probe", false)
	if want := []string{Interpreter, "-I", "-S", "-B", "-c"}; strings.Join(argv[:5], " ") != strings.Join(want, " ") ||
		argv[6] != pack || argv[7] != "probe:probe" || len(argv) != 8 || !strings.Contains(argv[5], path(ShimPath)) {
		t.Fatalf("ImageCommand = %q", argv)
	}
	argv[0] = hostPython
	argv[5] = strings.ReplaceAll(argv[5], path(ShimPath), dir)
	argv = append(argv[:1], append([]string{"-v"}, argv[1:]...)...)
	run := runShim(t, argv, nil, request(t, "probe", `{}`))
	resp := checkResponse(t, run.stdout)
	var got struct {
		Own  bool     `json:"own"`
		Path []string `json:"path"`
	}
	if !resp.OK || json.Unmarshal(resp.Result, &got) != nil || !got.Own || len(got.Path) != 0 {
		t.Fatalf("response %s %s; stderr:\n%s", resp.Result, resp.Error, run.stderr)
	}
	if !strings.Contains(run.stderr, "# code object from '"+filepath.Join(dir, "__pycache__", "agentnode_tool.")) {
		t.Errorf("the shim was not loaded from its bytecode:\n%s", run.stderr)
	}
	if got := ImageCommand(pack, "m.tool", true); got[6] != "--package-entrypoint" || got[7] != pack || len(got) != 9 {
		t.Errorf("ImageCommand(packageLevel) = %q", got)
	}
}

// path is the directory of the image path p.
func path(p string) string { return filepath.Dir(p) }
