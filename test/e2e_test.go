package test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// binDir holds agentnode and the bundled plugins, as `make build` lays them
// out; extraDir holds test-only plugins that scripts copy where they need.
var binDir, extraDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "agentnode-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(tmp)
	binDir = filepath.Join(tmp, "bin")
	extraDir = filepath.Join(tmp, "extra")
	if err := build(binDir, extraDir); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		return 2
	}
	return m.Run()
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// build compiles the CLI, every plugins/<kind>/<name> main package into
// bin/agentnode-<kind>-<name>, and test/plugins/<name> into
// extra/agentnode-trust-<name>.
func build(bin, extra string) error {
	root := repoRoot()
	// As `make build` builds them: agentnode and the sandbox backends with
	// cgo, linked statically; the other plugins without cgo.
	staticBuild := func(out, pkg, tags string) error {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -extldflags -static",
			"-tags", tags+" netgo osusergo", "-o", out, pkg)
		cmd.Dir, cmd.Stderr = root, os.Stderr
		return cmd.Run()
	}
	goBuild := func(out, pkg string) error { return staticBuild(out, pkg, "seccomp") }
	goBuildPlugin := func(out, pkg, kind string) error {
		if kind == "sandbox" {
			return goBuild(out, pkg)
		}
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-tags", "seccomp", "-o", out, pkg)
		cmd.Dir, cmd.Stderr = root, os.Stderr
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		return cmd.Run()
	}
	if err := goBuild(filepath.Join(bin, "agentnode"), "./cmd/agentnode"); err != nil {
		return err
	}
	// The egress forwarder `agentnode sandbox build` bakes into the image,
	// built as `make build` does.
	fwd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w",
		"-o", filepath.Join(bin, "agentnode-forwarder"), "./sdk/sandbox/forwarder")
	fwd.Dir, fwd.Stderr, fwd.Env = root, os.Stderr, append(os.Environ(), "CGO_ENABLED=0")
	if err := fwd.Run(); err != nil {
		return err
	}
	// A second CLI with the egresstest tag (it sends the test destinations
	// of the environment to the egress plugin, egress.txtar):
	// bin/agentnode.egresstest (beside the bundled plugins it pins with),
	// run as the symlink extra/egresstest/agentnode. It starts the egress
	// plugin built with the same tag (PermitForTest and the test resolver),
	// bin/agentnode-egress-proxy-egresstest, which `agentnode setup` pins
	// with the others; a release agentnode never starts it.
	if err := staticBuild(filepath.Join(bin, "agentnode.egresstest"), "./cmd/agentnode", "seccomp egresstest"); err != nil {
		return err
	}
	egt := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-tags", "seccomp egresstest",
		"-o", filepath.Join(bin, "agentnode-egress-proxy-egresstest"), "./plugins/egress/proxy")
	egt.Dir, egt.Stderr, egt.Env = root, os.Stderr, append(os.Environ(), "CGO_ENABLED=0")
	if err := egt.Run(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(extra, "egresstest"), 0o755); err != nil {
		return err
	}
	if err := os.Symlink(filepath.Join(bin, "agentnode.egresstest"), filepath.Join(extra, "egresstest", "agentnode")); err != nil {
		return err
	}
	mains, _ := filepath.Glob(filepath.Join(root, "plugins", "*", "*", "main.go"))
	for _, m := range mains {
		dir := filepath.Dir(m)
		name := filepath.Base(dir)
		kind := filepath.Base(filepath.Dir(dir))
		if err := goBuildPlugin(filepath.Join(bin, "agentnode-"+kind+"-"+name), "./"+rel(root, dir), kind); err != nil {
			return err
		}
	}
	tests, _ := filepath.Glob(filepath.Join(root, "test", "plugins", "*", "main.go"))
	for _, m := range tests {
		dir := filepath.Dir(m)
		if err := goBuildPlugin(filepath.Join(extra, "agentnode-trust-"+filepath.Base(dir)), "./"+rel(root, dir), "trust"); err != nil {
			return err
		}
	}
	// Test agents: static (they run in the busybox-static sandbox image),
	// extra/agent-<name>.
	agents, _ := filepath.Glob(filepath.Join(root, "test", "agents", "*", "main.go"))
	for _, m := range agents {
		if err := buildStatic(filepath.Join(extra, "agent-"+filepath.Base(filepath.Dir(m))), filepath.Dir(m)); err != nil {
			return err
		}
	}
	// Test MCP servers: static go-sdk servers (they run in the sandbox
	// image too), extra/mcpserver-<name>.
	servers, _ := filepath.Glob(filepath.Join(root, "test", "mcpservers", "*", "main.go"))
	for _, m := range servers {
		if err := buildStatic(filepath.Join(extra, "mcpserver-"+filepath.Base(filepath.Dir(m))), filepath.Dir(m)); err != nil {
			return err
		}
	}
	// rusage: the attack suite's `bounded` command runs commands under it.
	if err := buildStatic(filepath.Join(extra, "rusage"), filepath.Join(root, "test", "tools", "rusage")); err != nil {
		return err
	}
	// Attacker programs of the attack suite: static, extra/attack-<name>
	// (they run on the host, confined, and in the sandbox image).
	attackers, _ := filepath.Glob(filepath.Join(root, "test", "attack", "*", "main.go"))
	for _, m := range attackers {
		if err := buildStatic(filepath.Join(extra, "attack-"+filepath.Base(filepath.Dir(m))), filepath.Dir(m)); err != nil {
			return err
		}
	}
	// Example third-party Guard inspectors: extra/agentnode-guard-<name>.
	examples, _ := filepath.Glob(filepath.Join(root, "sdk", "guard", "example", "*", "main.go"))
	for _, m := range examples {
		dir := filepath.Dir(m)
		if err := goBuildPlugin(filepath.Join(extra, "agentnode-guard-"+filepath.Base(dir)), "./"+rel(root, dir), "guard"); err != nil {
			return err
		}
	}
	return nil
}

func rel(root, p string) string {
	r, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return r
}

// passEnv are variables the scripts need from the outside (the keychain's
// session bus).
var passEnv = []string{"DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "AGENTNODE_REQUIRE_KEYRING"}

func TestScripts(t *testing.T) {
	testscript.Run(t, scriptParams(filepath.Join("testdata", "script")))
}

// scriptParams are the testscript parameters of every script suite here
// (testdata/script and the attack suite in attack/): the built binaries on
// PATH, a private HOME and AGENTNODE_HOME per script, non-interactive, and
// the conditions and commands below.
func scriptParams(dir string) testscript.Params {
	return testscript.Params{
		Dir: dir,
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", binDir+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("BIN", binDir)
			env.Setenv("EXTRA", extraDir)
			// The Python runtime's test packages (shaped like AgentNode's
			// starter packs), for scripts to copy.
			env.Setenv("PYPACKS", filepath.Join(repoRoot(), "sdk", "python", "testdata"))
			env.Setenv("PYCHECK", filepath.Join(repoRoot(), "test", "testdata", "pycheck.py"))
			env.Setenv("HOME", filepath.Join(env.WorkDir, "user"))
			env.Setenv("AGENTNODE_HOME", filepath.Join(env.WorkDir, "user", ".agentnode"))
			env.Setenv("AGENTNODE_NON_INTERACTIVE", "1")
			for _, k := range passEnv {
				if v := os.Getenv(k); v != "" {
					env.Setenv(k, v)
				}
			}
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "keyring":
				// In CI (AGENTNODE_REQUIRE_KEYRING=1) a missing keychain fails
				// the script instead of skipping it.
				if os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" && os.Getenv("AGENTNODE_REQUIRE_KEYRING") == "1" {
					return false, fmt.Errorf("AGENTNODE_REQUIRE_KEYRING=1 but no session bus: run through test/keyring.sh")
				}
				return os.Getenv("DBUS_SESSION_BUS_ADDRESS") != "", nil
			case "root":
				// The sandbox scripts need root (libcontainer); in CI
				// (AGENTNODE_REQUIRE_LIBCONTAINER=1) not being root fails
				// them instead of skipping them.
				if os.Geteuid() != 0 && os.Getenv("AGENTNODE_REQUIRE_LIBCONTAINER") == "1" {
					return false, fmt.Errorf("AGENTNODE_REQUIRE_LIBCONTAINER=1 but not root: the sandbox scripts need root")
				}
				return os.Geteuid() == 0, nil
			case "gvisor":
				// gVisor's runsc, which the Podman backend runs
				// sandbox.runtime gvisor with (test/deps.sh installs it);
				// in CI (AGENTNODE_REQUIRE_GVISOR=1) missing fails.
				_, err := os.Stat("/usr/bin/runsc")
				if err != nil && os.Getenv("AGENTNODE_REQUIRE_GVISOR") == "1" {
					return false, fmt.Errorf("AGENTNODE_REQUIRE_GVISOR=1 but no /usr/bin/runsc: %v (test/deps.sh test installs it)", err)
				}
				return err == nil, nil
			case "python":
				// Debian's python3 with the modules the Python runtime's
				// scripts use (pip and wheel build test wheels, pytest runs
				// the test packs' suites). In CI (AGENTNODE_REQUIRE_PYTHON=1)
				// a missing one fails the script instead of skipping it.
				err := exec.Command("/usr/bin/python3", "-c", "import pip, wheel, pytest").Run()
				if err != nil && os.Getenv("AGENTNODE_REQUIRE_PYTHON") == "1" {
					return false, fmt.Errorf("AGENTNODE_REQUIRE_PYTHON=1 but /usr/bin/python3 with pip, wheel and pytest: %v (test/deps.sh test installs them)", err)
				}
				return err == nil, nil
			}
			if b, ok := strings.CutPrefix(cond, "backend:"); ok {
				return backendAvailable(b)
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"mountro": cmdMountRO,
			// bounded, jsonlines: attack_test.go.
			"bounded":   cmdBounded,
			"jsonlines": cmdJSONLines,
			"status":    cmdStatus,
			// llmserver: llmserver_test.go.
			"llmserver": cmdLLMServer,
			// tlsserver: egress_test.go.
			"tlsserver": cmdTLSServer,
			"orphan":    cmdOrphan, // orphan_test.go
			// pytest-pack: pytestpack_test.go.
			"pytest-pack": cmdPytestPack,
			// newuser, asuser: asuser_test.go.
			"newuser": cmdNewUser,
			"asuser":  cmdAsUser,
		},
		RequireExplicitExec: false,
	}
}

// backendAvailable reports whether the docker or podman engine can be
// used by the e2e scripts. With AGENTNODE_REQUIRE_<ENGINE>=1 (CI) an engine
// that is not usable fails the script instead of skipping it.
func backendAvailable(name string) (bool, error) {
	var ok bool
	switch name {
	case "docker":
		ok = exec.Command("docker", "info").Run() == nil
	case "podman":
		_, err := exec.LookPath("podman")
		ok = err == nil
	default:
		return false, fmt.Errorf("unknown backend %q", name)
	}
	if !ok && os.Getenv("AGENTNODE_REQUIRE_"+strings.ToUpper(name)) == "1" {
		return false, fmt.Errorf("AGENTNODE_REQUIRE_%s=1 but %s is not usable", strings.ToUpper(name), name)
	}
	return ok, nil
}

// status N CMD [ARG...] runs CMD like exec and fails unless it exits with
// exactly N; stdout and stderr are kept for later stdout/stderr checks.
func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: status N command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("status: bad exit code %q", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("status: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// mountro DIR: bind-mount DIR read-only onto itself for the rest of the
// script (root only; chmod does not stop root).
func cmdMountRO(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: mountro DIR")
	}
	dir := ts.MkAbs(args[0])
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		ts.Fatalf("bind mount %s: %v", dir, err)
	}
	ts.Defer(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	if err := syscall.Mount("", dir, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		ts.Fatalf("remount %s read-only: %v", dir, err)
	}
}
