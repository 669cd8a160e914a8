package test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BenchmarkInstallWheelDep is one `agentnode install` of a runtime: python
// package with one wheel dependency (a pure-Python wheel built here): the
// package copied and checked, pip started in the libcontainer sandbox with
// the Python installer image (verified first), the wheel resolved from the
// wheelhouse and installed, the tree streamed back and unpacked into .deps,
// both trees hashed, the lockfile entry written. The installer image is
// built once, before the timer.
func BenchmarkInstallWheelDep(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("libcontainer needs root")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		b.Skip("no Debian python3")
	}
	dir := b.TempDir()
	files := map[string]string{
		"lib/pyproject.toml":       "[build-system]\nrequires = [\"setuptools>=61\"]\nbuild-backend = \"setuptools.build_meta\"\n[project]\nname = \"benchlib\"\nversion = \"1.0\"\n",
		"lib/benchlib/__init__.py": "def one():\n    return 1\n",
		"pkg/pyproject.toml":       "[project]\nname = \"bench-py\"\nversion = \"1.0.0\"\ndependencies = [\"benchlib==1.0\"]\n",
		"pkg/bench_py/__init__.py": "",
		"pkg/bench_py/tool.py":     "import benchlib\n\ndef one():\n    return benchlib.one()\n",
		"pkg/agentnode.yaml": `manifest_version: "0.2"
package_id: bench-py
package_type: toolpack
name: Bench
publisher: bench
version: 1.0.0
summary: One wheel dependency.
runtime: python
capabilities:
  tools:
    - name: one
      entrypoint: "bench_py.tool:one"
      description: One.
      input_schema: {type: object}
permissions:
  network: {level: none}
  filesystem: {level: none}
  code_execution: {level: none}
`,
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	wh := filepath.Join(dir, "wh")
	wheel := exec.Command("/usr/bin/python3", "-I", "-m", "pip", "wheel", "--isolated", "--no-deps", "--no-build-isolation",
		"--no-index", "--disable-pip-version-check", "-q", "-w", wh, filepath.Join(dir, "lib"))
	if out, err := wheel.CombinedOutput(); err != nil {
		b.Fatalf("build the wheel: %v\n%s", err, out)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	env := append(os.Environ(), "AGENTNODE_HOME="+filepath.Join(dir, "home"), "AGENTNODE_NON_INTERACTIVE=1")
	cli(b, env, "setup")
	cli(b, env, "sandbox", "build", "--python-installer")
	want := []byte("dependencies benchlib==1.0 sha256:")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := cli(b, env, "install", filepath.Join(dir, "pkg"), "--wheelhouse", wh)
		if !bytes.Contains(out, want) {
			b.Fatalf("unexpected output %s", out)
		}
	}
}
