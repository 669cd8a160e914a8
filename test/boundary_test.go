package test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
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

// serverSideHTTP are the net/http identifiers that read requests from a
// peer: the server side and its request parser.
var serverSideHTTP = map[string]bool{
	"ReadRequest": true, "Server": true, "Serve": true, "ServeTLS": true, "ListenAndServe": true,
	"ListenAndServeTLS": true, "ServeMux": true, "NewServeMux": true, "Handle": true, "HandleFunc": true,
}

// httpServerUses returns "file:line: http.X" for every use of a
// serverSideHTTP identifier through an import of net/http in the Go files.
func httpServerUses(fset *token.FileSet, files []*ast.File) []string {
	var out []string
	for _, f := range files {
		names := map[string]bool{}
		for _, imp := range f.Imports {
			if imp.Path.Value != `"net/http"` {
				continue
			}
			name := "http"
			if imp.Name != nil {
				name = imp.Name.Name
			}
			names[name] = true
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && names[id.Name] && serverSideHTTP[sel.Sel.Name] {
				out = append(out, fmt.Sprintf("%s: %s.%s", fset.Position(sel.Pos()), id.Name, sel.Sel.Name))
			}
			return true
		})
	}
	return out
}

// TestKernelParsesNoEgressTraffic: what sandboxed code sends through sealed
// egress is parsed in the egress plugin's process (plugins/egress/proxy),
// never in the kernel, which holds the audit log and the plugin
// credentials. No kernel package (in any build, egresstest included)
// depends on a plugin, and none uses net/http's server side or request
// parser.
func TestKernelParsesNoEgressTraffic(t *testing.T) {
	for _, tags := range []string{"seccomp", "seccomp egresstest"} {
		cmd := exec.Command("go", "list", "-tags", tags, "-deps", "-f", "{{.ImportPath}}", "./kernel/...")
		cmd.Dir = repoRoot()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		if !strings.Contains(string(out), module+"/kernel/dispatch") {
			t.Fatalf("go list output does not look like the kernel's closure")
		}
		for _, p := range strings.Fields(string(out)) {
			if strings.HasPrefix(p, module+"/plugins/") || p == module+"/kernel/egress" {
				t.Errorf("tags %q: the kernel depends on %s", tags, p)
			}
		}
	}
	var files []string
	err := filepath.WalkDir(filepath.Join(repoRoot(), "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) < 50 {
		t.Fatalf("kernel sources: %d files, %v", len(files), err)
	}
	fset := token.NewFileSet()
	var parsed []*ast.File
	for _, p := range files {
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
	}
	if uses := httpServerUses(fset, parsed); len(uses) > 0 {
		t.Errorf("kernel code uses net/http's server side:\n%s", strings.Join(uses, "\n"))
	}
}

// TestKernelImportsNoExecutor: the kernel decides and the executors run
// what it decided (kernel/plan); no kernel package depends on an executor
// or a backend (executor/...): cmd/agentnode wires them in. The executors
// in turn do not depend on the pipeline (kernel/dispatch).
func TestKernelImportsNoExecutor(t *testing.T) {
	deps := func(pattern string) []string {
		cmd := exec.Command("go", "list", "-tags", "seccomp", "-deps", "-f", "{{.ImportPath}}", pattern)
		cmd.Dir = repoRoot()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pattern, err)
		}
		return strings.Fields(string(out))
	}
	kernel := deps("./kernel/...")
	if !slices.Contains(kernel, module+"/kernel/plan") {
		t.Fatal("go list output does not look like the kernel's closure")
	}
	for _, p := range kernel {
		if p == module+"/executor" || strings.HasPrefix(p, module+"/executor/") {
			t.Errorf("the kernel depends on %s", p)
		}
	}
	executors := deps("./executor/...")
	if !slices.Contains(executors, module+"/executor/toolpack") {
		t.Fatal("go list output does not look like the executors' closure")
	}
	for _, p := range executors {
		if p == module+"/kernel/dispatch" {
			t.Errorf("an executor depends on %s", p)
		}
	}
}

// TestHTTPServerUses checks the matcher, so that the test above can fail.
func TestHTTPServerUses(t *testing.T) {
	src := `package p
import (
	"fmt"
	h "net/http"
	"bufio"
)
func f(r *bufio.Reader) { h.ReadRequest(r); _ = h.Client{}; var s h.Server; _ = s }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := httpServerUses(fset, []*ast.File{f})
	if len(got) != 2 || !strings.HasSuffix(got[0], "h.ReadRequest") || !strings.HasSuffix(got[1], "h.Server") {
		t.Fatalf("httpServerUses = %q", got)
	}
}

// TestKernelDrivesNoContainerEngine: backends own their engines. Loading
// an image into Docker or Podman is the backend plugin's optional
// capability (sandbox.ImageLoader), called by the front end (`agentnode
// sandbox build`, cmd/agentnode/imagebuild builds the image); the kernel
// neither depends on the front end, the loader or an engine client, nor
// runs a docker or podman executable.
func TestKernelDrivesNoContainerEngine(t *testing.T) {
	cmd := exec.Command("go", "list", "-tags", "seccomp", "-deps", "-f", "{{.ImportPath}}", "./kernel/...")
	cmd.Dir = repoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if !strings.Contains(string(out), module+"/kernel/image") {
		t.Fatalf("go list output does not look like the kernel's closure")
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, module+"/cmd/") || p == module+"/sdk/sandbox/imageload" ||
			strings.HasPrefix(p, "github.com/moby/moby/") || strings.HasPrefix(p, "github.com/docker/") {
			t.Errorf("the kernel depends on %s", p)
		}
	}
	var files []*ast.File
	fset := token.NewFileSet()
	err = filepath.WalkDir(filepath.Join(repoRoot(), "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		files = append(files, f)
		return err
	})
	if err != nil || len(files) < 50 {
		t.Fatalf("kernel sources: %d files, %v", len(files), err)
	}
	if uses := engineExecs(fset, files); len(uses) > 0 {
		t.Errorf("kernel code runs a container engine:\n%s", strings.Join(uses, "\n"))
	}
}

// engineExecs lists the files among files that import os/exec and name
// docker or podman in a string literal.
func engineExecs(fset *token.FileSet, files []*ast.File) []string {
	var out []string
	for _, f := range files {
		execs := false
		for _, imp := range f.Imports {
			execs = execs || imp.Path.Value == `"os/exec"`
		}
		if !execs {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s := strings.ToLower(lit.Value); strings.Contains(s, "docker") || strings.Contains(s, "podman") {
					out = append(out, fset.Position(lit.Pos()).String()+": "+lit.Value)
				}
			}
			return true
		})
	}
	return out
}

// TestEngineExecs checks the matcher, so that the test above can fail.
func TestEngineExecs(t *testing.T) {
	fset := token.NewFileSet()
	var files []*ast.File
	for i, src := range []string{
		"package p\nimport \"os/exec\"\nfunc f() { exec.Command(\"podman\", \"load\") }\n",
		"package p\nimport x \"os/exec\"\nvar engines = []string{\"docker\"}\nvar _ = x.Command\n",
		"package p\nvar launchers = []string{\"docker\", \"podman\"}\n", // no os/exec: a word list
		"package p\nimport \"os/exec\"\nfunc f() { exec.Command(\"runc\") }\n",
	} {
		f, err := parser.ParseFile(fset, fmt.Sprintf("p%d.go", i), src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	got := engineExecs(fset, files)
	if len(got) != 2 || !strings.HasPrefix(got[0], "p0.go") || !strings.HasPrefix(got[1], "p1.go") {
		t.Fatalf("engineExecs = %q, want the podman exec of p0.go and the docker literal of p1.go", got)
	}
}

// maxKernelLines bounds the trusted core: the Go lines of kernel/ outside
// tests (README.md, Layout). What a decision does not need belongs to an
// executor, a backend, a plugin or a front end.
const maxKernelLines = 15000

// TestKernelSize keeps the kernel within maxKernelLines.
func TestKernelSize(t *testing.T) {
	n := 0
	err := filepath.WalkDir(filepath.Join(repoRoot(), "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		n += bytes.Count(b, []byte("\n"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 1000 {
		t.Fatalf("counted %d lines: the walk did not reach the kernel's files", n)
	}
	if n > maxKernelLines {
		t.Errorf("kernel/ has %d non-test Go lines, more than %d: move what a decision does not need out of the trusted core", n, maxKernelLines)
	}
	t.Logf("kernel/: %d non-test Go lines (at most %d)", n, maxKernelLines)
}
