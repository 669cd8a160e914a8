package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentnode/agentnode/cmd/agentnode/imagebuild"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// requireEnv is set in CI: a test that would skip fails instead.
const requireEnv = "AGENTNODE_REQUIRE_PODMAN"

var (
	fixtureOnce sync.Once
	fixtureHome string // a temporary agentnode home with the built image
	fixtureImg  *image.Image
	fixturePack string
	fixtureErr  error
)

// TestMain removes the shared fixtures after all tests. The image stays in
// podman's storage: other packages' tests may be using it, and loading it
// again is a no-op.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range []string{fixtureHome, pluginDir, ownStateDir} {
		if d != "" {
			_ = os.RemoveAll(d)
		}
	}
	// Empty of tasks by now (every test removes its containers): rmdir it
	// everywhere, with what podman made under it (conmon's cgroup),
	// deepest first.
	if ownCgroupParent != "" {
		for _, pat := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/*"} {
			m, _ := filepath.Glob(filepath.Join(pat, ownCgroupParent))
			for _, d := range m {
				var dirs []string
				_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
					if err == nil && e.IsDir() {
						dirs = append(dirs, p)
					}
					return nil
				})
				for i := len(dirs) - 1; i >= 0; i-- {
					_ = os.Remove(dirs[i])
				}
			}
		}
	}
	os.Exit(code)
}

// This test process's own state directory and cgroup parent (setup gives
// them to every backend it makes): two test runs on one machine, or a test
// run beside a real agentnode, never see each other's containers' cgroups
// or files.
var (
	ownOnce         sync.Once
	ownStateDir     string
	ownCgroupParent string // "/agentnode-podman-test-<pid>-<random>"
	ownErr          error
)

func ownPlaces() (stateDir, cgroupParent string, err error) {
	ownOnce.Do(func() {
		var r [4]byte
		_, _ = rand.Read(r[:])
		ownCgroupParent = fmt.Sprintf("%s-test-%d-%s", DefaultCgroupParent, os.Getpid(), hex.EncodeToString(r[:]))
		ownStateDir, ownErr = os.MkdirTemp("", "agentnode-podman-state-")
	})
	return ownStateDir, ownCgroupParent, ownErr
}

// requireRunsc skips a gVisor test when runsc is not installed, or fails
// it when AGENTNODE_REQUIRE_GVISOR=1 (test/deps.sh installs it).
func requireRunsc(tb testing.TB) {
	tb.Helper()
	if findBinary(filepath.SplitList(searchPath), "runsc") != "" {
		return
	}
	if os.Getenv("AGENTNODE_REQUIRE_GVISOR") == "1" {
		tb.Fatalf("runsc (gVisor) is not installed in %s (and AGENTNODE_REQUIRE_GVISOR=1)", searchPath)
	}
	tb.Skipf("runsc (gVisor) is not installed in %s", searchPath)
}

// skipOrFail skips the test, or fails it when AGENTNODE_REQUIRE_PODMAN=1.
func skipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(requireEnv) == "1" {
		tb.Fatalf("%s (and %s=1)", msg, requireEnv)
	}
	tb.Skip(msg)
}

// fixture is the sandbox image, built by cmd/agentnode/imagebuild and
// loaded into podman by the backend, and a package directory.
type fixture struct {
	Img  *image.Image
	Pack string
}

func buildFixture() error {
	var err error
	if fixtureHome, err = os.MkdirTemp("", "agentnode-podman-test-"); err != nil {
		return err
	}
	if err := os.Chmod(fixtureHome, 0o755); err != nil {
		return err
	}
	fwd := filepath.Join(fixtureHome, imagebuild.ForwarderName)
	if err := sandboxtest.BuildForwarder(context.Background(), fwd); err != nil {
		return err
	}
	if fixtureImg, err = imagebuild.Build(filepath.Join(fixtureHome, "home"), imagebuild.BuildOptions{ForwarderPath: fwd}); err != nil {
		return fmt.Errorf("building the sandbox image: %w", err)
	}
	// Loaded as `agentnode sandbox build` does: by the backend.
	b := newBackend(testLogger())
	if b.stateDir, b.cgroupParent, err = ownPlaces(); err != nil {
		return err
	}
	if _, err := b.LoadImage(context.Background(), &sandbox.LoadImageRequest{Image: fixtureImg.Ref, Layout: fixtureImg.Layout}); err != nil {
		return fmt.Errorf("loading the sandbox image into podman: %w", err)
	}
	fixturePack = filepath.Join(fixtureHome, "pack")
	if err := os.Mkdir(fixturePack, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(fixturePack, "hello.txt"), []byte("from the pack\n"), 0o644)
}

// testLogger logs warnings and errors of the backend to the test's stderr.
func testLogger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "podman-test", Output: os.Stderr, Level: hclog.Warn})
}

// setup returns a backend and the fixture, or skips (fails in CI) when
// podman cannot run here.
func setup(tb testing.TB) (*backend, fixture) {
	tb.Helper()
	if findBinary(filepath.SplitList(searchPath), "podman") == "" {
		skipOrFail(tb, "podman is not installed")
	}
	if os.Geteuid() != 0 {
		skipOrFail(tb, "the podman backend needs root")
	}
	fixtureOnce.Do(func() { fixtureErr = buildFixture() })
	if fixtureErr != nil {
		skipOrFail(tb, "cannot prepare the image: %v", fixtureErr)
	}
	stateDir, cgroupParent, err := ownPlaces()
	if err != nil {
		tb.Fatalf("state dir: %v", err)
	}
	b := newBackend(testLogger())
	b.stateDir, b.cgroupParent = stateDir, cgroupParent
	// A run the host cancelled is still being cleaned up when the host's
	// Run returns; the test must not end (and the process exit) under it.
	tb.Cleanup(func() {
		if !b.drain(time.Minute) {
			tb.Error("runs still in progress a minute after the test")
		}
	})
	resp, err := b.Availability(tb.Context(), &sandbox.AvailabilityRequest{Image: fixtureImg.Ref})
	if err != nil {
		tb.Fatalf("Availability: %v", err)
	}
	if !resp.Available {
		skipOrFail(tb, "podman unavailable: %s: %s", resp.Reason, resp.Detail)
	}
	return b, fixture{Img: fixtureImg, Pack: fixturePack}
}

// newID returns a fresh run id and registers a safety net that removes
// anything of it that Run may have left behind, even when the test fails.
func newID(tb testing.TB, prefix string) string {
	tb.Helper()
	var r [6]byte
	_, _ = rand.Read(r[:])
	id := "t-" + prefix + "-" + hex.EncodeToString(r[:])
	tb.Cleanup(func() { forceCleanup(id) })
	return id
}

// podmanCLI runs podman as an operator would (with the same runtime and
// cgroup manager as the backend, but the host's configuration), for
// assertions made independently of the backend's code.
func podmanCLI(args ...string) (string, error) {
	bin := findBinary(filepath.SplitList(searchPath), "podman")
	runc := findBinary(filepath.SplitList(searchPath), "runc")
	cmd := exec.Command(bin, append([]string{"--runtime", runc, "--cgroup-manager", "cgroupfs"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("podman %s: %w: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// forceCleanup removes every container labelled with run id.
func forceCleanup(id string) {
	out, _ := podmanCLI("ps", "--all", "--quiet", "--no-trunc", "--filter", "label="+runLabel+"="+id)
	for _, c := range strings.Fields(out) {
		_, _ = podmanCLI("rm", "--force", "--time", "0", c)
	}
}

// assertGone checks, independently of the backend, that nothing of run id
// remains: no container by name or label, and no container or run cgroup
// under b's cgroup parent (this process's own, where tests run one
// container at a time). With b nil (a plugin binary, which runs in the
// shared default parent where other processes' containers may be) the
// cgroups are not looked at.
func assertGone(tb testing.TB, b *backend, id string) {
	tb.Helper()
	if _, err := podmanCLI("container", "exists", namePrefix+id); err == nil {
		tb.Errorf("container %s%s still exists", namePrefix, id)
	}
	out, err := podmanCLI("ps", "--all", "--external", "--quiet", "--filter", "label="+runLabel+"="+id)
	if err != nil {
		tb.Fatal(err)
	}
	if strings.TrimSpace(out) != "" {
		tb.Errorf("containers labelled %s=%s left: %s", runLabel, id, out)
	}
	if b == nil {
		return
	}
	var left []string
	for _, pat := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/*"} {
		for _, g := range []string{"libpod-*", "run-*"} {
			m, _ := filepath.Glob(filepath.Join(pat, b.cgroupParent, g))
			left = append(left, m...)
		}
	}
	if len(left) > 0 {
		tb.Errorf("container or run cgroups left under %s: %v", b.cgroupParent, left)
	}
}

// spec returns a run spec for args on the fixture.
func spec(fx fixture, id string, args ...string) sandbox.Spec {
	return sandbox.Spec{
		RunID:      id,
		Image:      fx.Img.Ref,
		ImageStore: fx.Img.Store,
		PackageDir: fx.Pack,
		Args:       args,
		Env:        []string{"AGENTNODE_TEST=1"},
	}
}
