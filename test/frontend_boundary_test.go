package test

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// frontEndDeps returns the packages in deps that the kernel's build
// closure may not contain: cmd/ (the CLI and the front ends below it —
// mcpserve, pkginstall, pydeps, pyimage) and plugins/.
func frontEndDeps(deps []string) []string {
	var out []string
	for _, p := range deps {
		for _, root := range []string{module + "/cmd", module + "/plugins"} {
			if p == root || strings.HasPrefix(p, root+"/") {
				out = append(out, p)
			}
		}
	}
	return out
}

// TestKernelImportsNoFrontEnd: the front ends (cmd/agentnode and the
// packages below it) call the kernel, never the other way round, so the
// trusted core stays what a run needs. Kernel tests may use a front end
// (to install a package, say); the kernel itself may not.
func TestKernelImportsNoFrontEnd(t *testing.T) {
	cmd := exec.Command("go", "list", "-tags", "seccomp", "-deps", "-f", "{{.ImportPath}}", "./kernel/...")
	cmd.Dir = repoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./kernel/...: %v", err)
	}
	deps := strings.Fields(string(out))
	if !strings.Contains(string(out), module+"/kernel/dispatch") {
		t.Fatalf("go list output does not look like the kernel's closure")
	}
	if bad := frontEndDeps(deps); len(bad) > 0 {
		t.Errorf("the kernel depends on front ends or plugins: %s", strings.Join(bad, ", "))
	}
}

// TestFrontEndDeps checks the matcher, so that the test above can fail.
func TestFrontEndDeps(t *testing.T) {
	deps := []string{"fmt", module + "/kernel/store", module + "/cmd/agentnode/pkginstall", module + "/cmd",
		module + "/plugins/trust/attest", module + "/cmdx", module + "/sdk/plugin"}
	want := []string{module + "/cmd/agentnode/pkginstall", module + "/cmd", module + "/plugins/trust/attest"}
	if got := frontEndDeps(deps); !reflect.DeepEqual(got, want) {
		t.Fatalf("frontEndDeps = %q, want %q", got, want)
	}
}
