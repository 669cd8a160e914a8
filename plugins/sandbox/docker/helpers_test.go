package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/client"

	"github.com/agentnode/agentnode/cmd/agentnode/imagebuild"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// requireEnv is set in CI: a test that would skip fails instead.
const requireEnv = "AGENTNODE_REQUIRE_DOCKER"

// helperEnv makes the test binary a helper process (see TestMain).
const helperEnv = "AGENTNODE_DOCKER_TEST_HELPER"

// TestMain stops the private dockerd (after removing every container in it)
// and removes the built plugin after all tests, also when they fail.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelper(os.Getenv(helperEnv)))
	}
	code := m.Run()
	if theEnv != nil {
		if err := theEnv.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the test dockerd: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	if pluginDir != "" {
		_ = os.RemoveAll(pluginDir)
	}
	os.Exit(code)
}

// skipOrFail skips the test, or fails it when AGENTNODE_REQUIRE_DOCKER=1.
func skipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(requireEnv) == "1" {
		tb.Fatalf("%s (and %s=1)", msg, requireEnv)
	}
	tb.Skip(msg)
}

// dockerEnv is a private dockerd (its own socket, data root and exec root
// in a temporary directory) with the sandbox image loaded.
type dockerEnv struct {
	dir    string
	socket string
	host   string // unix://socket
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
	img    *image.Image
	cli    *client.Client
}

var (
	envOnce sync.Once
	theEnv  *dockerEnv
	envSkip string
	envErr  error
)

// testEnv starts the private dockerd on first use, or skips (fails in CI).
func testEnv(tb testing.TB) *dockerEnv {
	tb.Helper()
	envOnce.Do(func() { theEnv, envSkip, envErr = startEnv() })
	if envSkip != "" {
		skipOrFail(tb, "%s", envSkip)
	}
	if envErr != nil {
		tb.Fatal(envErr)
	}
	return theEnv
}

func lookTool(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/bin", "/usr/local/sbin"} {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// startEnv starts dockerd, waits for it and loads the image built by
// cmd/agentnode/imagebuild.Build. A non-empty skip says why it cannot run here.
func startEnv() (e *dockerEnv, skip string, err error) {
	if os.Geteuid() != 0 {
		return nil, "starting a private dockerd needs root", nil
	}
	dockerd, docker := lookTool("dockerd"), lookTool("docker")
	if dockerd == "" || docker == "" {
		return nil, "dockerd or the docker CLI is not installed", nil
	}
	if _, err := os.Stat(imagebuild.DefaultBusybox); err != nil {
		return nil, "busybox-static (for the sandbox image) is not installed", nil
	}
	// Short: the socket paths must fit sun_path.
	dir, err := os.MkdirTemp("", "andk-")
	if err != nil {
		return nil, "", err
	}
	// Traversable, so a helper process of another uid reaches the socket
	// (and is refused by the socket's own mode).
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, "", err
	}
	e = &dockerEnv{dir: dir, socket: filepath.Join(dir, "docker.sock"), log: filepath.Join(dir, "dockerd.log"), exited: make(chan struct{})}
	e.host = "unix://" + e.socket
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, e.logTail())
			if serr := e.stop(); serr != nil {
				err = errors.Join(err, serr)
			}
			e = nil
		}
	}()
	daemonJSON := []byte("{}\n")
	if _, err := os.Stat("/usr/bin/runsc"); err == nil {
		// gVisor, registered as the gVisor suite needs it (backend.go).
		daemonJSON, _ = json.Marshal(map[string]any{"runtimes": map[string]any{
			GVisorRuntime: map[string]any{"path": "/usr/bin/runsc", "runtimeArgs": GVisorRuntimeArgs}}})
	}
	if err := os.WriteFile(filepath.Join(dir, "daemon.json"), daemonJSON, 0o600); err != nil {
		return e, "", err
	}
	logf, err := os.Create(e.log)
	if err != nil {
		return e, "", err
	}
	defer logf.Close()
	ns := fmt.Sprintf("andk-%d", os.Getpid())
	e.cmd = exec.Command(dockerd,
		"--iptables=false", "--ip6tables=false", "--bridge=none",
		"--host", e.host,
		"--config-file", filepath.Join(dir, "daemon.json"),
		"--data-root", filepath.Join(dir, "data"),
		"--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "dockerd.pid"),
		"--containerd-namespace", ns,
		"--containerd-plugins-namespace", ns+"-plugins",
	)
	e.cmd.Env = append(os.Environ(), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	// Its own process group (stop signals all of it); dies with us.
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := e.cmd.Start(); err != nil {
		e.cmd = nil
		return e, "", fmt.Errorf("starting dockerd: %w", err)
	}
	go func() {
		_ = e.cmd.Wait()
		close(e.exited)
	}()
	if err := e.waitReady(60 * time.Second); err != nil {
		return e, "", err
	}
	if e.cli, err = client.New(client.WithHost(e.host)); err != nil {
		return e, "", err
	}

	// The docker CLI the benchmark compares with reads DOCKER_HOST.
	os.Setenv("DOCKER_HOST", e.host)
	os.Setenv("DOCKER_CONFIG", filepath.Join(dir, "cli"))
	home := filepath.Join(dir, "home")
	fwd := filepath.Join(dir, imagebuild.ForwarderName)
	if err := sandboxtest.BuildForwarder(context.Background(), fwd); err != nil {
		return e, "", err
	}
	if e.img, err = imagebuild.Build(home, imagebuild.BuildOptions{ForwarderPath: fwd}); err != nil {
		return e, "", fmt.Errorf("building the sandbox image: %w", err)
	}
	// Loaded as `agentnode sandbox build` does: by the backend.
	ep, err := parseHost(e.host, "test")
	if err != nil {
		return e, "", err
	}
	b := newBackend(nil, ep, nil)
	defer b.close()
	if _, err := b.LoadImage(context.Background(), &sandbox.LoadImageRequest{Image: e.img.Ref, Layout: e.img.Layout}); err != nil {
		return e, "", fmt.Errorf("loading the sandbox image: %w", err)
	}
	return e, "", nil
}

// waitReady polls the socket until the engine answers /_ping.
func (e *dockerEnv) waitReady(limit time.Duration) error {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", e.socket)
	}}, Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-e.exited:
			return errors.New("dockerd exited during start-up")
		default:
		}
		resp, err := hc.Get("http://docker/_ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dockerd did not answer on %s within %v (last: %v)", e.socket, limit, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *dockerEnv) logTail() string {
	b, _ := os.ReadFile(e.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return "dockerd log (tail):\n" + string(b)
}

// stop removes every container of the private engine, stops dockerd (and
// its containerd), unmounts what is left under the directory and removes it.
func (e *dockerEnv) stop() error {
	var errs []error
	if e.cli != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		list, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true})
		if err != nil {
			errs = append(errs, fmt.Errorf("listing leftover containers: %w", err))
		}
		for _, c := range list.Items {
			errs = append(errs, fmt.Errorf("container %s %v was left behind by a test", c.ID[:12], c.Names))
			if _, err := e.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
				errs = append(errs, err)
			}
		}
		cancel()
		_ = e.cli.Close()
	}
	if e.cmd != nil && e.cmd.Process != nil {
		_ = syscall.Kill(e.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-e.exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
			<-e.exited
		}
		// Its managed containerd shares the process group.
		_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
	}
	unmountUnder(e.dir)
	if err := os.RemoveAll(e.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// unmountUnder lazily unmounts every mount below dir, deepest first, so that
// RemoveAll never descends into a mounted file system.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var mps []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			mps = append(mps, f[4])
		}
	}
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	for _, mp := range mps {
		_ = syscall.Unmount(mp, syscall.MNT_DETACH)
	}
}

// newTestBackend is the backend talking to the private engine.
func newTestBackend(tb testing.TB, e *dockerEnv) *backend {
	tb.Helper()
	ep, err := parseHost(e.host, "test")
	if err != nil {
		tb.Fatal(err)
	}
	b := newBackend(hclog.New(&hclog.LoggerOptions{Name: "docker-test", Output: os.Stderr, Level: hclog.Warn}), ep, nil)
	tb.Cleanup(b.close)
	return b
}

// newRunID returns a fresh run id and registers a safety net that removes
// anything Run may have left behind, even when the test fails.
func newRunID(tb testing.TB, e *dockerEnv, prefix string) string {
	tb.Helper()
	var r [6]byte
	_, _ = rand.Read(r[:])
	id := prefix + "-" + hex.EncodeToString(r[:])
	tb.Cleanup(func() { forceRemoveRun(e, id) })
	return id
}

func forceRemoveRun(e *dockerEnv, runID string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, _ := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", runLabel+"="+runID)})
	for _, c := range list.Items {
		_, _ = e.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}
	_, _ = e.cli.ContainerRemove(ctx, namePrefix+runID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
}

// assertGone checks, independently of the backend, that the engine knows
// nothing of run runID.
func assertGone(tb testing.TB, e *dockerEnv, runID string) {
	tb.Helper()
	ctx := context.Background()
	if _, err := e.cli.ContainerInspect(ctx, namePrefix+runID, client.ContainerInspectOptions{}); err == nil {
		tb.Errorf("container %s%s still exists", namePrefix, runID)
	}
	list, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", runLabel+"="+runID)})
	if err != nil {
		tb.Fatal(err)
	}
	if len(list.Items) > 0 {
		tb.Errorf("%d container(s) labelled %s=%s still exist", len(list.Items), runLabel, runID)
	}
}

// packDir returns a world-readable package directory with a file in it.
func packDir(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "pack")
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for p := dir; p != "/"; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o001 == 0 {
			_ = os.Chmod(p, fi.Mode().Perm()|0o005)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("from the pack\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// spec returns a run spec for args.
func spec(e *dockerEnv, pack, id string, args ...string) sandbox.Spec {
	return sandbox.Spec{
		RunID:      id,
		Image:      e.img.Ref,
		ImageStore: e.img.Store,
		PackageDir: pack,
		Args:       args,
		Env:        []string{"AGENTNODE_TEST=1"},
		Timeout:    30 * time.Second,
	}
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

var (
	pluginOnce sync.Once
	pluginDir  string
	pluginBin  string
	pluginErr  error
)

// buildPlugin builds this package like `make build` does, once per test
// binary, and writes its host file pointing at the private engine.
func buildPlugin(tb testing.TB, e *dockerEnv) string {
	tb.Helper()
	pluginOnce.Do(func() {
		pluginDir, pluginErr = os.MkdirTemp("", "agentnode-docker-bin-")
		if pluginErr != nil {
			return
		}
		pluginBin = filepath.Join(pluginDir, "agentnode-sandbox-docker")
		cmd := exec.Command(goTool(), "build", "-trimpath", "-ldflags", "-s -w", "-o", pluginBin, ".")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			pluginErr = fmt.Errorf("building the plugin: %w\n%s", err, out.String())
			return
		}
		pluginErr = os.WriteFile(pluginBin+HostFileSuffix, []byte("# the test's private dockerd\n"+e.host+"\n"), 0o644)
	})
	if pluginErr != nil {
		tb.Fatal(pluginErr)
	}
	return pluginBin
}
