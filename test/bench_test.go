package test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/kernel/hashcache"
	"github.com/agentnode/agentnode/kernel/image"
)

// benchHome sets up an agentnode home with the echo tool installed, trusted
// through the test trust plugin (no keychain needed), placed on the host.
func benchHome(b *testing.B) (env []string, tool string) {
	b.Helper()
	dir := b.TempDir()
	pkg := filepath.Join(dir, "pkg")
	tool = filepath.Join(pkg, "bin", "echo")
	if err := os.MkdirAll(filepath.Dir(tool), 0o755); err != nil {
		b.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", tool, "./tools/echo")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build echo tool: %v\n%s", err, out)
	}
	manifest := `manifest_version: "0.2"
package_id: bench-tools
package_type: toolpack
name: Bench
publisher: bench
version: 1.0.0
summary: Trivial tool for the cold-run benchmark
runtime: exec
capabilities:
  tools:
    - name: echo
      description: Echo the input
      entrypoint: bin/echo
      action_type: read
      input_schema: {type: object}
permissions:
  network: {level: none}
  filesystem: {level: temp}
  code_execution: {level: none}
`
	if err := os.WriteFile(filepath.Join(pkg, "agentnode.yaml"), []byte(manifest), 0o644); err != nil {
		b.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	env = append(os.Environ(), "AGENTNODE_HOME="+home, "AGENTNODE_NON_INTERACTIVE=1")
	plugin := filepath.Join(home, "plugins", "agentnode-trust-faulty")
	// The test trust plugin says "trusted" for anything; the attestation
	// (signature not checked by it) mirrors what a real trusted package
	// carries, so start-up treats the run as a host run.
	att := filepath.Join(dir, "att.json")
	claim := `{"package_id":"bench-tools","version":"1.0.0","artifact_hash":"sha256:` + strings.Repeat("0", 64) +
		`","trust_level":"trusted","issuer":"bench","issued_at":"2026-01-01T00:00:00Z","expires_at":"2099-01-01T00:00:00Z","signature":"` +
		strings.Repeat("A", 86) + `=="}`
	if err := os.WriteFile(att, []byte(claim), 0o644); err != nil {
		b.Fatal(err)
	}
	steps := [][]string{
		{"setup"},
		{"install", pkg, "--attestation", att},
		{"config", "set", "sandbox.host_trust_policy", "default"},
		{"config", "set", "trust.plugin", "faulty"},
		// The default burst (10 per second) would refuse a fast loop.
		{"config", "set", "guard.rate_limits", `{"bench-tools":{"per_minute":1000000,"per_hour":1000000,"burst":1000000}}`},
	}
	for _, s := range steps {
		cli(b, env, s...)
	}
	data, err := os.ReadFile(filepath.Join(extraDir, "agentnode-trust-faulty"))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(plugin, data, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(plugin+".mode", []byte("ok\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	cli(b, env, "plugins", "pin", plugin)
	// A machine runs packages and plugins installed earlier: wait until the
	// files just written count as settled for the digest caches
	// (kernel/hashcache records a file only 2 s after its last change), and
	// let one run fill them, as any earlier run on that machine would have.
	time.Sleep(2100 * time.Millisecond)
	cli(b, env, "run", "bench-tools", "echo", "--input", `{"x":1}`)
	return env, tool
}

func cli(b *testing.B, env []string, args ...string) []byte {
	b.Helper()
	out, err := cliCmd(env, args...).CombinedOutput()
	if err != nil {
		b.Fatalf("agentnode %v: %v\n%s", args, err, out)
	}
	return out
}

// cliCmd is agentnode with args in the benchmark's directory (next to
// AGENTNODE_HOME): install writes agentnode.lock into the working
// directory, and every run reads it from there.
func cliCmd(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(binDir, "agentnode"), args...)
	cmd.Env = env
	for _, kv := range env {
		if h, ok := strings.CutPrefix(kv, "AGENTNODE_HOME="); ok {
			cmd.Dir = filepath.Dir(h)
		}
	}
	return cmd
}

// BenchmarkColdRun is one complete `agentnode run` of a trivial host tool:
// process start, config, artifact re-hash, trust plugin, Guard (policy and
// the builtin inspector plugin), two fsynced audit records, the tool itself.
// Compare with BenchmarkOSExecTool (goal: ≤ that + 30 ms).
func BenchmarkColdRun(b *testing.B) {
	env, _ := benchHome(b)
	want := []byte(`"x":1`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := cli(b, env, "run", "bench-tools", "echo", "--input", `{"x":1}`)
		if !bytes.Contains(out, want) {
			b.Fatalf("unexpected output %s", out)
		}
	}
}

// BenchmarkColdRunSandboxed is the same call for a community-tier package
// (unknown trust): placed in the libcontainer sandbox, image digest and
// rootfs verified, container started, torn down and proven gone.
func BenchmarkColdRunSandboxed(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("libcontainer needs root")
	}
	env, _ := benchHome(b)
	cli(b, env, "sandbox", "build")
	cli(b, env, "config", "set", "trust.plugin", "attest")
	cli(b, env, "config", "set", "trust.minimum_trust_level", "unknown")
	want := []byte(`"x":1`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := cli(b, env, "run", "bench-tools", "echo", "--input", `{"x":1}`)
		if !bytes.Contains(out, want) {
			b.Fatalf("unexpected output %s", out)
		}
	}
}

// BenchmarkOSExecTool runs the same tool binary directly with os/exec.
func BenchmarkOSExecTool(b *testing.B) {
	_, tool := benchHome(b)
	stdin := []byte(`{"tool":"echo","input":{"x":1}}` + "\n")
	want := []byte(`"x":1`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(tool)
		cmd.Stdin = bytes.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil || !bytes.Contains(out, want) {
			b.Fatalf("%v %s", err, out)
		}
	}
}

// BenchmarkColdRunSideBySide is the cold-run row of `make bench`
// (test/benchtable): interleaved, the tool run directly with os/exec
// ("direct"), `agentnode version`, `agentnode run --dry-run` (the decision
// only), the curated tool's whole `agentnode run` on the host ("host"),
// and, as root, the same tool of a package nobody vouches for through the
// libcontainer sandbox ("sandbox").
func BenchmarkColdRunSideBySide(b *testing.B) {
	env, tool := benchHome(b)
	want := []byte(`"x":1`)
	input := []byte(`{"tool":"echo","input":{"x":1}}` + "\n")
	vs := []variant{
		{"direct", func() {
			cmd := exec.Command(tool)
			cmd.Stdin = bytes.NewReader(input)
			out, err := cmd.Output()
			if err != nil || !bytes.Contains(out, want) {
				b.Fatalf("%v %s", err, out)
			}
		}},
		{"version", func() { timedCLI(b, env, []byte("agentnode"), "version") }},
		{"dry-run", func() {
			timedCLI(b, env, []byte("allow"), "run", "bench-tools", "echo", "--input", `{"x":1}`, "--dry-run")
		}},
		{"host", func() { timedCLI(b, env, want, "run", "bench-tools", "echo", "--input", `{"x":1}`) }},
	}
	if os.Geteuid() == 0 {
		sb, _ := benchHome(b)
		cli(b, sb, "sandbox", "build")
		cli(b, sb, "config", "set", "trust.plugin", "attest")
		cli(b, sb, "config", "set", "trust.minimum_trust_level", "unknown")
		settleImage(b, sb, "sandbox.image")
		vs = append(vs, variant{"sandbox", func() {
			timedCLI(b, sb, want, "run", "bench-tools", "echo", "--input", `{"x":1}`)
		}})
	}
	sideBySide(b, vs)
}

// settleImage waits until the files of the image the config key names
// count as settled for the digest cache (kernel/hashcache), as on a
// machine where the image was built earlier.
func settleImage(b *testing.B, env []string, key string) {
	b.Helper()
	ref := strings.TrimSpace(string(cli(b, env, "config", "get", key)))
	_, mhex, err := image.ParseRef(ref)
	if err != nil {
		b.Fatalf("%s %q: %v", key, ref, err)
	}
	var home string
	for _, kv := range env {
		if h, ok := strings.CutPrefix(kv, "AGENTNODE_HOME="); ok {
			home = h
		}
	}
	time.Sleep(time.Until(ctime(b, image.RootfsDir(home, mhex)).Add(hashcache.Settle + 100*time.Millisecond)))
}
