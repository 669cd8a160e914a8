package sdk_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/agentnode/agentnode"

// forbiddenRoots are the parts of the module the SDK must never import: a
// third party writing a plugin has only sdk/, so the bundled plugins must too.
var forbiddenRoots = []string{module + "/kernel", module + "/plugins", module + "/cmd"}

// forbidden reports whether importPath is one of forbiddenRoots or below one.
func forbidden(importPath string) bool {
	for _, root := range forbiddenRoots {
		if importPath == root || strings.HasPrefix(importPath, root+"/") {
			return true
		}
	}
	return false
}

// listedPackage is the part of `go list -json` output the test needs.
type listedPackage struct {
	ImportPath   string
	ForTest      string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// violations returns "importer -> imported" for every forbidden import of the
// listed packages, sorted.
func violations(pkgs []listedPackage) []string {
	var out []string
	for _, p := range pkgs {
		for _, list := range [][]string{p.Imports, p.TestImports, p.XTestImports} {
			for _, imp := range list {
				if forbidden(imp) {
					out = append(out, p.ImportPath+" -> "+imp)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// TestSDKImportsNoKernelPluginsOrCmd lists every package in the build and
// test closure of sdk/... (so transitive imports count too) and fails if any
// of them imports kernel/, plugins/ or cmd/ — or is one of them.
func TestSDKImportsNoKernelPluginsOrCmd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	cmd := exec.Command(goTool(), "list", "-e", "-deps", "-test", "-json=ImportPath,ForTest,Imports,TestImports,XTestImports", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listedPackage
	sdkPkgs := 0
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		if forbidden(strings.Fields(p.ImportPath)[0]) {
			// A package of the closure is itself forbidden; violations below
			// names who imports it.
			t.Errorf("the sdk/ closure contains %s", p.ImportPath)
		}
		if strings.HasPrefix(p.ImportPath, module+"/sdk") {
			sdkPkgs++
		}
		pkgs = append(pkgs, p)
	}
	if sdkPkgs < 5 {
		t.Fatalf("go list found only %d sdk packages; is the test running in sdk/?", sdkPkgs)
	}
	if v := violations(pkgs); len(v) > 0 {
		t.Errorf("sdk/ must not import kernel/, plugins/ or cmd/:\n  %s", strings.Join(v, "\n  "))
	}
}

// TestForbiddenMatching checks the matcher itself, so that the boundary test
// can fail.
func TestForbiddenMatching(t *testing.T) {
	for path, want := range map[string]bool{
		module + "/kernel":                    true,
		module + "/kernel/reason":             true,
		module + "/plugins/sandbox/docker":    true,
		module + "/cmd/agentnode":             true,
		module + "/cmd":                       true,
		module + "/sdk/trust":                 false,
		module + "/kernelx":                   false,
		module + "/cmdline":                   false,
		module + "/specs":                     false,
		"github.com/other/project/kernel":     false,
		"github.com/agentnode/agentnode2/cmd": false,
		"fmt":                                 false,
	} {
		if got := forbidden(path); got != want {
			t.Errorf("forbidden(%q) = %v, want %v", path, got, want)
		}
	}

	fake := []listedPackage{
		{ImportPath: module + "/sdk/ok", Imports: []string{"fmt", module + "/sdk/plugin"}},
		{ImportPath: module + "/sdk/bad", Imports: []string{"context", module + "/kernel/reason"}},
		{ImportPath: module + "/sdk/badtest", TestImports: []string{module + "/cmd/agentnode"}},
		{ImportPath: module + "/sdk/badxtest", XTestImports: []string{module + "/plugins/guard/x"}},
	}
	want := []string{
		module + "/sdk/bad -> " + module + "/kernel/reason",
		module + "/sdk/badtest -> " + module + "/cmd/agentnode",
		module + "/sdk/badxtest -> " + module + "/plugins/guard/x",
	}
	if got := violations(fake); !reflect.DeepEqual(got, want) {
		t.Errorf("violations = %q, want %q", got, want)
	}
	if got := violations(fake[:1]); len(got) != 0 {
		t.Errorf("violations of a clean list = %q", got)
	}
}
