package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/imagestore"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
	"github.com/agentnode/agentnode/sdk/sandbox/subid"
)

// requireEnv is set in CI: a test that would skip fails instead.
const requireEnv = "AGENTNODE_REQUIRE_LIBCONTAINER"

// busyboxApplets are linked into the test rootfs.
var busyboxApplets = []string{"sh", "cat", "id", "sleep", "yes", "echo", "true", "false", "head", "ls", "touch", "wc", "kill"}

var (
	fixtureOnce sync.Once
	fixtureDir  string
	fixtureErr  error
	// fixtureShared: fixtureDir is the parent process's (fixtureEnv).
	fixtureShared bool
)

// This test process's own state root and cgroup parent (setup gives them
// to every backend it makes): two test runs on one machine, or a test run
// beside a real agentnode, never see or reap each other's containers.
var (
	ownOnce         sync.Once
	ownStateRoot    string
	ownCgroupParent string // "/agentnode-test-<pid>-<random>"
	ownSubUID       string // a private subuid file holding the reservation
	ownSubGID       string // and its subgid file
	ownErr          error
)

// ownPlaces makes them, once (lazily: a re-exec as container init must not).
func ownPlaces() (stateRoot, cgroupParent string, err error) {
	ownOnce.Do(func() {
		var r [4]byte
		_, _ = rand.Read(r[:])
		ownCgroupParent = fmt.Sprintf("%s-test-%d-%s", DefaultCgroupParent, os.Getpid(), hex.EncodeToString(r[:]))
		ownStateRoot, ownErr = os.MkdirTemp("", "agentnode-libcontainer-state-")
		if ownErr != nil {
			return
		}
		// The reservation `agentnode setup` makes, in private copies of
		// /etc/subuid and /etc/subgid (clear of this host's accounts).
		ownSubUID, ownSubGID = ownStateRoot+"-subuid", ownStateRoot+"-subgid"
		_, _, ownErr = subid.Reserve(subid.Files{UID: ownSubUID, GID: ownSubGID})
	})
	return ownStateRoot, ownCgroupParent, ownErr
}

// TestMain removes the shared rootfs fixture, the state root and the
// cgroup parent after all tests. (A re-exec as container init never gets
// here: main.go's init takes over first.)
func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureShared {
		fixtureDir = ""
	}
	for _, d := range []string{fixtureDir, pluginDir, ownStateRoot, ownSubUID, ownSubGID} {
		if d != "" {
			_ = os.RemoveAll(d)
		}
	}
	// Empty by now (every test cleans its runs up): rmdir in every hierarchy.
	if rel := strings.TrimPrefix(ownCgroupParent, "/"); rel != "" {
		for _, pat := range []string{"/sys/fs/cgroup/" + rel, "/sys/fs/cgroup/*/" + rel} {
			m, _ := filepath.Glob(pat)
			for _, d := range m {
				_ = os.Remove(d)
			}
		}
	}
	os.Exit(code)
}

// skipOrFail skips the test, or fails it when AGENTNODE_REQUIRE_LIBCONTAINER=1.
func skipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(requireEnv) == "1" {
		tb.Fatalf("%s (and %s=1)", msg, requireEnv)
	}
	tb.Skip(msg)
}

// fixture is a tiny rootfs (static busybox), unpacked as the image
// fixtureImage in an image store (sdk/sandbox/imagestore), and a package
// dir, built once.
type fixture struct {
	Store, Image string // Spec.ImageStore and Spec.Image
	Rootfs       string // the image's rootfs in Store
	Pack         string
}

// fixtureImage is the fixture's image reference (no manifest: libcontainer
// runs the rootfs).
var fixtureImage = "agentnode-test@sha256:" + strings.Repeat("1", 64)

func buildFixture() (string, error) {
	dir, err := os.MkdirTemp("", "agentnode-libcontainer-test-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return dir, err
	}
	root, err := imagestore.RootfsDir(filepath.Join(dir, "images"), fixtureImage)
	if err != nil {
		return dir, err
	}
	for _, d := range []string{"bin", "tmp", "sandbox-home", "pack", "proc", "sys", "dev", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return dir, err
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		return dir, err
	}
	src, err := exec.LookPath("busybox")
	if err != nil {
		src = "/bin/busybox"
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return dir, fmt.Errorf("static busybox needed for the test rootfs: %w", err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), data, 0o755); err != nil {
		return dir, err
	}
	for _, a := range busyboxApplets {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil {
			return dir, err
		}
	}
	passwd := "root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/sandbox-home:/bin/sh\n"
	if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte(passwd), 0o644); err != nil {
		return dir, err
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "group"), []byte("root:x:0:\nsandbox:x:1000:\n"), 0o644); err != nil {
		return dir, err
	}
	// Sealed egress: the forwarder and the socket's mount point, where
	// cmd/agentnode/imagebuild's build puts them.
	fwd := filepath.Join(root, profile.EgressForwarderPath)
	if err := os.MkdirAll(filepath.Dir(fwd), 0o755); err != nil {
		return dir, err
	}
	if err := sandboxtest.BuildForwarder(context.Background(), fwd); err != nil {
		return dir, err
	}
	mp := filepath.Join(root, profile.EgressSocketPath)
	if err := os.MkdirAll(filepath.Dir(mp), 0o755); err != nil {
		return dir, err
	}
	if err := os.WriteFile(mp, nil, 0o444); err != nil {
		return dir, err
	}
	pack := filepath.Join(dir, "pack")
	if err := os.MkdirAll(pack, 0o755); err != nil {
		return dir, err
	}
	if err := os.WriteFile(filepath.Join(pack, "hello.txt"), []byte("from the pack\n"), 0o644); err != nil {
		return dir, err
	}
	return dir, nil
}

// fixtureEnv names the fixture a parent test process built for this one
// (re-executed as a normal user, which cannot build the forwarder outside
// the module): it is the parent's to remove.
const fixtureEnv = "AGENTNODE_TEST_FIXTURE_DIR"

// ensureFixture builds the fixture once, or takes the parent's.
func ensureFixture() {
	fixtureOnce.Do(func() {
		if d := os.Getenv(fixtureEnv); d != "" {
			fixtureDir, fixtureShared = d, true
			return
		}
		fixtureDir, fixtureErr = buildFixture()
	})
}

// setup returns the backend and the fixture, or skips (fails in CI) when
// libcontainer cannot run here.
func setup(tb testing.TB) (*backend, fixture) {
	tb.Helper()
	rootless := os.Getenv(rootlessEnv) == "1"
	if os.Geteuid() != 0 && !rootless {
		skipOrFail(tb, "libcontainer tests need root")
	}
	if rootless && os.Geteuid() == 0 {
		tb.Fatal("re-executed as a normal user, but running as root")
	}
	ensureFixture()
	if fixtureErr != nil {
		skipOrFail(tb, "cannot build test rootfs: %v", fixtureErr)
	}
	fx := fixture{Store: filepath.Join(fixtureDir, "images"), Image: fixtureImage, Pack: filepath.Join(fixtureDir, "pack")}
	fx.Rootfs, _ = imagestore.RootfsDir(fx.Store, fx.Image)
	b := newBackend(hclog.New(&hclog.LoggerOptions{Name: "libcontainer-test", Output: os.Stderr, Level: hclog.Warn}))
	if !rootless {
		// As a normal user: its own state root, its delegated subtree,
		// its own subordinate ids (the defaults newBackend chose).
		stateRoot, cgroupParent, err := ownPlaces()
		if err != nil {
			tb.Fatalf("state root: %v", err)
		}
		b.stateRoot, b.cgroupParent = stateRoot, cgroupParent
		b.subuidFile, b.subgidFile = ownSubUID, ownSubGID
		// The built plugin, which the binary tests start from this process,
		// takes the same files.
		tb.Setenv(subUIDFileEnv, ownSubUID)
		tb.Setenv(subGIDFileEnv, ownSubGID)
	}
	resp, err := b.Availability(tb.Context(), &sandbox.AvailabilityRequest{Image: fx.Image, ImageStore: fx.Store})
	if err != nil {
		tb.Fatalf("Availability: %v", err)
	}
	if !resp.Available {
		skipOrFail(tb, "libcontainer unavailable: %s: %s", resp.Reason, resp.Detail)
	}
	return b, fx
}

// newID returns a fresh run id and registers a safety net that kills and
// destroys anything Run may have left behind, even when the test fails.
func newID(tb testing.TB, b *backend, prefix string) string {
	tb.Helper()
	var r [6]byte
	_, _ = rand.Read(r[:])
	id := prefix + "-" + hex.EncodeToString(r[:])
	tb.Cleanup(func() { forceCleanup(b, id) })
	return id
}

func forceCleanup(b *backend, id string) {
	if c, err := libcontainer.Load(b.stateRoot, id); err == nil {
		_ = c.Signal(unix.SIGKILL)
		_ = c.Destroy()
	}
	_ = os.RemoveAll(filepath.Join(b.stateRoot, id))
	for _, p := range cgroupDirsOf(b, id) {
		_ = os.Remove(p)
	}
}

// cgroupDirsOf lists <hierarchy>/<parent>/<id> for every hierarchy mounted
// under /sys/fs/cgroup, found by globbing (independently of cleanup.go).
func cgroupDirsOf(b *backend, id string) []string {
	var out []string
	rel := strings.TrimPrefix(b.cgroupParent, "/") + "/" + id
	for _, pat := range []string{"/sys/fs/cgroup/" + rel, "/sys/fs/cgroup/*/" + rel} {
		m, _ := filepath.Glob(pat)
		out = append(out, m...)
	}
	return out
}

// assertNoLeftovers checks, independently of the backend, that nothing of
// run id remains: state dir, cgroup dirs, mounts under the rootfs.
func assertNoLeftovers(tb testing.TB, b *backend, fx fixture, id string) {
	tb.Helper()
	if _, err := os.Lstat(filepath.Join(b.stateRoot, id)); !errors.Is(err, fs.ErrNotExist) {
		tb.Errorf("state dir of %s left behind (lstat: %v)", id, err)
	}
	if left := cgroupDirsOf(b, id); len(left) > 0 {
		tb.Errorf("cgroup dirs of %s left behind: %v", id, left)
	}
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(fx.Rootfs))
	if err != nil {
		tb.Fatal(err)
	}
	if len(ms) > 0 {
		tb.Errorf("mounts under the rootfs left behind: %d (first %s)", len(ms), ms[0].Mountpoint)
	}
}

// spec returns a run spec for args on the fixture.
func spec(fx fixture, id string, args ...string) sandbox.Spec {
	return sandbox.Spec{
		RunID:      id,
		Image:      fx.Image,
		ImageStore: fx.Store,
		PackageDir: fx.Pack,
		Args:       args,
		Env:        []string{"AGENTNODE_TEST=1"},
	}
}

func cgroups2Unified() bool {
	var st unix.Statfs_t
	return unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}
