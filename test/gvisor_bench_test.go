package test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/image"
)

// BenchmarkGVisorSideBySide compares, interleaved, the same trivial tool of
// a package nobody vouches for (unknown trust: sandboxed) run by agentnode
// through the Podman backend natively ("podman-native") and on gVisor
// ("podman-gvisor"), against the raw gVisor runs of the same command:
// `runsc do` ("runsc-do", on the host's root, no cgroups) and `podman
// --runtime runsc run` of the same image with the package mounted
// ("podman-runsc-raw"). Needs root, podman and runsc.
func BenchmarkGVisorSideBySide(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the podman backend needs root")
	}
	runsc, err := exec.LookPath("runsc")
	if err != nil {
		b.Skip("runsc is not installed")
	}
	podman, err := exec.LookPath("podman")
	if err != nil {
		b.Skip("podman is not installed")
	}
	want := []byte(`"x":1`)
	input := []byte(`{"tool":"echo","input":{"x":1}}` + "\n")
	homes := map[string][]string{}
	var tool string
	for _, rt := range []string{"native", "gvisor"} {
		env, t := benchHome(b)
		tool = t
		cli(b, env, "sandbox", "build")
		cli(b, env, "config", "set", "trust.plugin", "attest")
		cli(b, env, "config", "set", "trust.minimum_trust_level", "unknown")
		cli(b, env, "config", "set", "sandbox.backend", "podman")
		cli(b, env, "config", "set", "sandbox.runtime", rt)
		settleImage(b, env, "sandbox.image")
		homes[rt] = env
	}
	ref := strings.TrimSpace(string(cli(b, homes["gvisor"], "config", "get", "sandbox.image")))
	name, mhex, err := image.ParseRef(ref)
	if err != nil {
		b.Fatal(err)
	}
	podmanRef := name + ":" + mhex[:12]
	run := func(name string, args ...string) func() {
		return func() {
			cmd := exec.Command(name, args...)
			cmd.Stdin = bytes.NewReader(input)
			out, err := cmd.Output()
			if err != nil || !bytes.Contains(out, want) {
				b.Fatalf("%s %v: %v %s", name, args, err, out)
			}
		}
	}
	pack := filepath.Dir(filepath.Dir(tool))
	sideBySide(b, []variant{
		{"podman-native", func() { timedCLI(b, homes["native"], want, "run", "bench-tools", "echo", "--input", `{"x":1}`) }},
		{"podman-gvisor", func() { timedCLI(b, homes["gvisor"], want, "run", "bench-tools", "echo", "--input", `{"x":1}`) }},
		{"runsc-do", run(runsc, "--network=none", "--ignore-cgroups", "do", tool)},
		{"podman-runsc-raw", run(podman, "--runtime", runsc, "--runtime-flag", "network=none", "--runtime-flag", "oci-seccomp",
			"--cgroup-manager", "cgroupfs", "--events-backend", "none", "run", "--rm", "-i", "--network", "none", "--read-only",
			"--user", "1000:1000", "-v", pack+":/pack:ro", podmanRef, "/pack/bin/echo")},
	})
}
