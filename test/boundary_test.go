package test

import (
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const module = "github.com/agentnode/agentnode"

// forbiddenDeps returns the packages of this module in deps that the bundled
// plugin pkg may not use: anything but sdk/, specs (the public formats the
// SDK embeds) and pkg itself — so not kernel/, cmd/, test/ or other plugins/.
// The plugin model: a plugin built only on sdk/ proves a third party can write the
// same.
func forbiddenDeps(pkg string, deps []string) []string {
	var out []string
	for _, p := range deps {
		if p != module && !strings.HasPrefix(p, module+"/") {
			continue
		}
		if p == pkg || strings.HasPrefix(p, pkg+"/") || strings.HasPrefix(p, module+"/sdk/") || p == module+"/specs" {
			continue
		}
		out = append(out, p)
	}
	return out
}

// TestPluginsImportOnlySDK checks every bundled plugin (plugins/<kind>/<name>)
// over its whole build closure. Tests of a plugin may use kernel/ (to build
// an image, say); the plugin itself may not.
func TestPluginsImportOnlySDK(t *testing.T) {
	mains, _ := filepath.Glob(filepath.Join(repoRoot(), "plugins", "*", "*", "main.go"))
	if len(mains) < 5 {
		t.Fatalf("found %d bundled plugins, expected at least 5", len(mains))
	}
	for _, m := range mains {
		pkg := module + "/" + filepath.ToSlash(rel(repoRoot(), filepath.Dir(m)))
		cmd := exec.Command("go", "list", "-tags", "seccomp", "-deps", "-f", "{{.ImportPath}}", pkg)
		cmd.Dir = repoRoot()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		if !strings.Contains(string(out), module+"/sdk/plugin") {
			t.Fatalf("%s: go list output does not look like a plugin's closure", pkg)
		}
		if bad := forbiddenDeps(pkg, deps); len(bad) > 0 {
			t.Errorf("%s depends on packages outside sdk/: %s", pkg, strings.Join(bad, ", "))
		}
	}
}

// TestForbiddenDeps checks the matcher, so that the test above can fail.
func TestForbiddenDeps(t *testing.T) {
	pkg := module + "/plugins/guard/builtin"
	deps := []string{
		"fmt", "github.com/santhosh-tekuri/jsonschema/v6",
		module + "/sdk/guard", pkg, pkg + "/internal/x",
		module + "/kernel/policy", module + "/cmd/agentnode", module + "/plugins/trust/attest",
		module + "/test", module + "/specs", "github.com/agentnode/agentnode2/kernel",
	}
	want := []string{module + "/kernel/policy", module + "/cmd/agentnode", module + "/plugins/trust/attest",
		module + "/test"}
	if got := forbiddenDeps(pkg, deps); !reflect.DeepEqual(got, want) {
		t.Fatalf("forbiddenDeps = %q, want %q", got, want)
	}
}

// TestEvaluatorPluginsLinkNoSchemaValidator: trust and guard plugins start
// for every command, and the JSON Schema validator's package initialization
// (it compiles every draft's meta-schema) costs about 5 ms of each start.
// The host validates tool inputs (sdk/guard/schemacheck) and sends the
// result; the bundled evaluators must not link the validator again.
func TestEvaluatorPluginsLinkNoSchemaValidator(t *testing.T) {
	for _, kind := range []string{"trust", "guard"} {
		mains, _ := filepath.Glob(filepath.Join(repoRoot(), "plugins", kind, "*", "main.go"))
		if len(mains) == 0 {
			t.Fatalf("no bundled %s plugin found", kind)
		}
		for _, m := range mains {
			pkg := module + "/" + filepath.ToSlash(rel(repoRoot(), filepath.Dir(m)))
			cmd := exec.Command("go", "list", "-tags", "seccomp", "-deps", "-f", "{{.ImportPath}}", pkg)
			cmd.Dir = repoRoot()
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list %s: %v", pkg, err)
			}
			if strings.Contains(string(out), "github.com/santhosh-tekuri/jsonschema") {
				t.Errorf("%s links github.com/santhosh-tekuri/jsonschema", pkg)
			}
		}
	}
}
