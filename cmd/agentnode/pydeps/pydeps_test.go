package pydeps

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/cmd/agentnode/tarsafe"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/python"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

func writePyproject(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, PyprojectFile), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

var py = &manifest.Manifest{Runtime: manifest.RuntimePython}

func TestRequirements(t *testing.T) {
	dir := writePyproject(t, `
[build-system]
requires = ["setuptools"]
[project]
name = "quad-pack"
dependencies = [
  "liba>=2",
  "Requests[socks] >= 2.8.1, == 2.8.*",
  " pydantic ",
  "tomli; python_version < '3.11'",
  "zope.interface~=5.0",
]
[project.optional-dependencies]
test = ["pytest"]
`)
	got, err := Requirements(dir, py)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"liba>=2", "Requests[socks] >= 2.8.1, == 2.8.*", "pydantic", "tomli; python_version < '3.11'", "zope.interface~=5.0"}
	if !slices.Equal(got, want) {
		t.Fatalf("requirements %q, want %q", got, want)
	}
	// None: no pyproject, no [project], no dependencies, another runtime.
	for name, dir := range map[string]string{
		"no pyproject":    t.TempDir(),
		"no project":      writePyproject(t, "[tool.x]\ny = 1\n"),
		"no dependencies": writePyproject(t, "[project]\nname = \"x\"\n"),
		"empty":           writePyproject(t, "[project]\ndependencies = []\n"),
	} {
		if got, err := Requirements(dir, py); err != nil || got != nil {
			t.Errorf("%s: %q, %v; want none", name, got, err)
		}
	}
	if got, err := Requirements(dir, &manifest.Manifest{Runtime: manifest.RuntimeExec}); err != nil || got != nil {
		t.Errorf("exec runtime: %q, %v; want none", got, err)
	}
}

func TestRequirementsRefused(t *testing.T) {
	cases := map[string]string{
		"not toml":          "[project\n",
		"not a list":        "[project]\ndependencies = \"liba\"\n",
		"dynamic":           "[project]\ndynamic = [\"dependencies\"]\n",
		"direct reference":  "[project]\ndependencies = [\"liba @ https://example.invalid/liba-1.0.tar.gz\"]\n",
		"file reference":    "[project]\ndependencies = [\"liba@file:///pack/liba.tar.gz\"]\n",
		"an option":         "[project]\ndependencies = [\"--index-url=http://example.invalid\"]\n",
		"a requirements -r": "[project]\ndependencies = [\"-r /etc/passwd\"]\n",
		"a path":            "[project]\ndependencies = [\"./local/dir\"]\n",
		"empty":             "[project]\ndependencies = [\"\"]\n",
		"control character": "[project]\ndependencies = [\"liba\\u001b[31m\"]\n",
		"too long":          "[project]\ndependencies = [\"" + strings.Repeat("a", MaxRequirementLen+1) + "\"]\n",
		"too many":          "[project]\ndependencies = [" + strings.Repeat("\"a\",", MaxRequirements+1) + "]\n",
	}
	for name, body := range cases {
		_, err := Requirements(writePyproject(t, body), py)
		if !errors.Is(err, ErrDependencies) {
			t.Errorf("%s: %v, want ErrDependencies", name, err)
		}
	}
	// A pyproject.toml that is not a regular file is refused, not read.
	dir := t.TempDir()
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, PyprojectFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Requirements(dir, py); !errors.Is(err, ErrDependencies) {
		t.Errorf("symlinked pyproject.toml: %v", err)
	}
}

// TestPipError: the message names the requirement, who needed it, and an
// sdist that is all the wheelhouse has of it.
func TestPipError(t *testing.T) {
	wh := t.TempDir()
	for _, f := range []string{"Lib_B-1.0.tar.gz", "liba-2.1-py3-none-any.whl", "other-1.0.tar.gz"} {
		if err := os.WriteFile(filepath.Join(wh, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in := &Installer{Wheelhouse: wh}
	stderr := "Looking in links: /pack\nProcessing /pack/liba-2.1-py3-none-any.whl\n" +
		"ERROR: Could not find a version that satisfies the requirement lib.b>=1 (from liba) (from versions: none)\n" +
		"ERROR: No matching distribution found for lib.b>=1\n"
	err := in.pipError([]string{"liba"}, stderr, 1)
	msg := err.Error()
	for _, want := range []string{`"lib.b>=1"`, "Lib_B-1.0.tar.gz", "wheels only", "required by liba", "nothing was installed"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if !errors.Is(err, ErrDependencies) || strings.Contains(msg, "other-1.0") {
		t.Errorf("error %v", err)
	}
	stderr = "ERROR: Could not find a version that satisfies the requirement nosuch (from versions: none)\n" +
		"ERROR: No matching distribution found for nosuch\n"
	msg = in.pipError([]string{"nosuch"}, stderr, 1).Error()
	if !strings.Contains(msg, `"nosuch"`) || strings.Contains(msg, "source distribution") || strings.Contains(msg, "required by") {
		t.Errorf("error %q", msg)
	}
	msg = in.pipError([]string{"x"}, "boom\nERROR: Cannot install x because these package versions have conflicting dependencies.\n", 1).Error()
	if !strings.Contains(msg, "conflicting dependencies") {
		t.Errorf("error %q", msg)
	}
}

// tarRunner is a sandbox whose process writes a given tar stream on its
// stdout and exits 0: the installed tree as the host receives it, which
// the host must not trust.
type tarRunner struct {
	stream func(w *tar.Writer) error
	spec   sandbox.Spec
}

func (r *tarRunner) Run(_ context.Context, req *sandbox.RunRequest) (*sandbox.RunResponse, error) {
	r.spec = req.Spec
	tw := tar.NewWriter(req.Stdout)
	err := r.stream(tw)
	if err == nil {
		err = tw.Close()
	}
	code := 0
	if err != nil {
		code = 141 // killed by the broken pipe, as a real process would be
	}
	return &sandbox.RunResponse{ExitCode: code, CleanupVerified: true}, nil
}

func file(tw *tar.Writer, name string, body []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
		return err
	}
	_, err := tw.Write(body)
	return err
}

// TestInstallHostile: what the sandbox streams back is unpacked by
// tarsafe under the caps: names out of .deps, symlinks out, a file over
// the cap and more bytes than the total cap are refused with
// ErrDependencies, and nothing is written outside .deps.
func TestInstallHostile(t *testing.T) {
	wh := t.TempDir()
	cases := map[string]struct {
		stream func(*tar.Writer) error
		kind   error
	}{
		"dot-dot":  {func(tw *tar.Writer) error { return file(tw, "../../escaped", []byte("x")) }, tarsafe.ErrUnsafePath},
		"absolute": {func(tw *tar.Writer) error { return file(tw, "/tmp/escaped", []byte("x")) }, tarsafe.ErrUnsafePath},
		"symlink out": {func(tw *tar.Writer) error {
			return tw.WriteHeader(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "../../.."})
		}, tarsafe.ErrLinkEscape},
		"write through a symlink": {func(tw *tar.Writer) error {
			if err := tw.WriteHeader(&tar.Header{Name: "d", Typeflag: tar.TypeSymlink, Linkname: "."}); err != nil {
				return err
			}
			return file(tw, "d/x", []byte("x"))
		}, tarsafe.ErrUnsafePath},
		"file over the cap": {func(tw *tar.Writer) error {
			return file(tw, "big", make([]byte, 4<<10+1))
		}, tarsafe.ErrTooLarge},
		"total over the cap": {func(tw *tar.Writer) error {
			for i := range 5 {
				if err := file(tw, "f"+string(rune('a'+i)), make([]byte, 4<<10)); err != nil {
					return err
				}
			}
			return nil
		}, tarsafe.ErrTooLarge},
		"device": {func(tw *tar.Writer) error {
			return tw.WriteHeader(&tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3})
		}, tarsafe.ErrSpecialFile},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			content := filepath.Join(base, "staging", "content")
			if err := os.MkdirAll(content, 0o755); err != nil {
				t.Fatal(err)
			}
			r := &tarRunner{stream: c.stream}
			in := &Installer{Sandbox: r, Backend: "test", Image: &image.Image{Ref: "x@sha256:" + strings.Repeat("0", 64)},
				Wheelhouse: wh, Caps: Caps{Entries: 100, FileBytes: 4 << 10, TotalBytes: 16 << 10}}
			_, err := in.Install(context.Background(), content, []string{"liba"})
			if !errors.Is(err, ErrDependencies) || !errors.Is(err, c.kind) {
				t.Fatalf("Install: %v, want ErrDependencies and %v", err, c.kind)
			}
			for _, p := range []string{filepath.Join(base, "escaped"), filepath.Join(base, "staging", "escaped"), "/tmp/escaped"} {
				if _, err := os.Lstat(p); err == nil {
					t.Fatalf("%s was written", p)
				}
			}
			// The spec: the wheelhouse at /pack, no network, the
			// requirements as arguments after "--".
			if r.spec.PackageDir != wh || r.spec.Network || r.spec.Args[len(r.spec.Args)-1] != "liba" ||
				!strings.Contains(r.spec.Args[2], "--only-binary :all:") || !strings.Contains(r.spec.Args[2], `-- "$@"`) {
				t.Fatalf("spec %+v", r.spec)
			}
			if r.spec.Limits.TmpBytes < MinTmpBytes || r.spec.Limits.MemoryBytes < r.spec.Limits.TmpBytes+MinMemoryBytes {
				t.Fatalf("limits %+v", r.spec.Limits)
			}
		})
	}
}

// TestInstallListsDistributions: a good stream lands in .deps, and the
// distributions are read from the dist-info directories.
func TestInstallListsDistributions(t *testing.T) {
	content := t.TempDir()
	r := &tarRunner{stream: func(tw *tar.Writer) error {
		for _, d := range []string{"./", "liba/", "liba-2.1.dist-info/", "lib_b-1.0.dist-info/"} {
			if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
				return err
			}
		}
		return file(tw, "liba/__init__.py", []byte("def quad(x):\n    return 4 * x\n"))
	}}
	in := &Installer{Sandbox: r, Image: &image.Image{}, Wheelhouse: t.TempDir()}
	got, err := in.Install(context.Background(), content, []string{"liba"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"lib_b==1.0", "liba==2.1"}; !slices.Equal(got, want) {
		t.Fatalf("installed %q, want %q", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(content, python.DepsDir, "liba", "__init__.py")); err != nil || !bytes.Contains(b, []byte("quad")) {
		t.Fatalf("installed file: %q %v", b, err)
	}
	// A package with a .deps of its own is refused before anything runs.
	r.spec = sandbox.Spec{}
	if _, err := in.Install(context.Background(), content, []string{"liba"}); !errors.Is(err, ErrDependencies) || r.spec.RunID != "" {
		t.Fatalf("second install into an existing .deps: %v (ran: %v)", err, r.spec.RunID != "")
	}
	// No wheelhouse, or one that is not a directory.
	for _, wh := range []string{"", filepath.Join(content, python.DepsDir, "liba", "__init__.py")} {
		in := &Installer{Sandbox: r, Image: &image.Image{}, Wheelhouse: wh}
		if _, err := in.Install(context.Background(), t.TempDir(), []string{"liba"}); !errors.Is(err, ErrDependencies) {
			t.Fatalf("wheelhouse %q: %v", wh, err)
		}
	}
}

var _ io.Writer = (*Tail)(nil)

func TestTail(t *testing.T) {
	tl := NewTail(8)
	for _, s := range []string{"abc", "defgh", "ijklmnop", "q"} {
		tl.Write([]byte(s))
	}
	if tl.String() != "jklmnopq" {
		t.Fatalf("tail %q", tl.String())
	}
}

// TestRequirementsMCPServer: a Python MCP server (mcp_server,
// install.manager pypi) gets its pyproject.toml dependencies installed
// like a runtime: python package, provided they hold the pinned server at
// exactly the pinned version, or the package is the server's own project
// at that version; anything looser is mcp_unpinned.
func TestRequirementsMCPServer(t *testing.T) {
	server := &manifest.Manifest{PackageType: manifest.TypeMCPServer, MCP: &manifest.MCP{
		Install: &manifest.MCPInstall{Manager: "pypi", Package: "mcp-server-clock", Version: "2026.1.5"}}}
	for name, body := range map[string]string{
		"wrapper":        "[project]\nname = \"clock-pack\"\ndependencies = [\"mcp_server.Clock == 2026.1.5\", \"tzlocal>=5\"]\n",
		"its own source": "[project]\nname = \"mcp-server-clock\"\nversion = \"2026.1.5\"\ndependencies = [\"tzlocal>=5\"]\n",
	} {
		if got, err := Requirements(writePyproject(t, body), server); err != nil || len(got) == 0 {
			t.Errorf("%s: %q %v", name, got, err)
		}
	}
	for name, body := range map[string]string{
		"not required":       "[project]\nname = \"clock-pack\"\ndependencies = [\"tzlocal>=5\"]\n",
		"a range":            "[project]\nname = \"clock-pack\"\ndependencies = [\"mcp-server-clock>=2026.1.5\"]\n",
		"another pin":        "[project]\nname = \"clock-pack\"\ndependencies = [\"mcp-server-clock==2026.1.4\"]\n",
		"with extras":        "[project]\nname = \"clock-pack\"\ndependencies = [\"mcp-server-clock[cli]==2026.1.5\"]\n",
		"with a marker":      "[project]\nname = \"clock-pack\"\ndependencies = [\"mcp-server-clock==2026.1.5; python_version > '3.99'\"]\n",
		"own, other version": "[project]\nname = \"mcp-server-clock\"\nversion = \"2026.1.6\"\ndependencies = [\"tzlocal>=5\"]\n",
	} {
		_, err := Requirements(writePyproject(t, body), server)
		if !errors.Is(err, ErrDependencies) || reason.CodeOf(err) != reason.MCPUnpinned {
			t.Errorf("%s: %v, want mcp_unpinned", name, err)
		}
	}
	// The npm-pinned servers and servers without a pyproject are not pydeps'.
	npm := &manifest.Manifest{PackageType: manifest.TypeMCPServer, MCP: &manifest.MCP{
		Install: &manifest.MCPInstall{Manager: "npm", Package: "x", Version: "1.0.0"}}}
	if got, err := Requirements(writePyproject(t, "[project]\ndependencies = [\"liba\"]\n"), npm); got != nil || err != nil {
		t.Errorf("npm server: %q %v", got, err)
	}
}

// TestRunFailure: how a sandboxed install's run maps to its refusal, in
// order: the extraction's refusal is named before a run error it caused.
func TestRunFailure(t *testing.T) {
	boom, refused := errors.New("boom"), errors.New("refused")
	ok := &sandbox.RunResponse{CleanupVerified: true}
	for _, c := range []struct {
		resp             *sandbox.RunResponse
		run, extract     error
		code             reason.Code
		wrapsRefused, ok bool
	}{
		{resp: nil, code: reason.SandboxUnavailable},
		{resp: &sandbox.RunResponse{}, code: reason.SandboxUnavailable},
		{resp: &sandbox.RunResponse{CleanupVerified: true, TimedOut: true}, extract: boom, code: reason.Timeout},
		{resp: ok, run: boom, extract: boom, wrapsRefused: true},
		{resp: &sandbox.RunResponse{CleanupVerified: true, OOMKilled: true, ExitCode: 137}, run: boom, code: reason.KilledMemory},
		{resp: ok, run: boom, code: reason.SandboxUnavailable},
		{resp: &sandbox.RunResponse{CleanupVerified: true, ExitCode: 1}, ok: true},
	} {
		err := RunFailure(c.resp, c.run, c.extract, refused, "libcontainer", "the dependencies", time.Second, 256<<20)
		switch {
		case c.ok && err != nil, !c.ok && err == nil:
			t.Errorf("%+v: %v", c, err)
		case c.wrapsRefused && !errors.Is(err, refused):
			t.Errorf("%+v: %v, want the extraction's refusal", c, err)
		case !c.ok && !c.wrapsRefused && reason.CodeOf(err) != c.code:
			t.Errorf("%+v: %v, want %s", c, err, c.code)
		}
	}
}
