package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

func run(t *testing.T, b *backend, s sandbox.Spec, stdin string) (*sandbox.RunResponse, string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	req := &sandbox.RunRequest{Spec: s, Stdout: &stdout, Stderr: &stderr}
	if stdin != "" {
		req.Stdin = strings.NewReader(stdin)
	}
	resp, err := b.Run(t.Context(), req)
	return resp, stdout.String(), stderr.String(), err
}

// TestRunBasics: argv, stdin, stdout, stderr, environment, exit status,
// identity, the package mount, HOME, and cleanup, in one container.
func TestRunBasics(t *testing.T) {
	e := testEnv(t)
	b := newTestBackend(t, e)
	pack := packDir(t)
	id := newRunID(t, e, "basics")
	script := `cat; echo "uid=$(id -u):$(id -g) home=$HOME test=$AGENTNODE_TEST pwd=$(pwd) host=$(hostname)"; ` +
		`cat /pack/hello.txt; touch "$HOME/x" && echo home-writable; echo to-stderr >&2; exit 3`
	resp, stdout, stderr, err := run(t, b, spec(e, pack, id, "sh", "-c", script), "from stdin\n")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := "from stdin\nuid=1000:1000 home=/sandbox-home test=1 pwd=/tmp host=sandbox\nfrom the pack\nhome-writable\n"
	if stdout != want || stderr != "to-stderr\n" {
		t.Errorf("stdout %q stderr %q, want %q and %q", stdout, stderr, want, "to-stderr\n")
	}
	if resp.ExitCode != 3 || resp.TimedOut || resp.Killed || !resp.CleanupVerified {
		t.Errorf("resp %+v, want exit 3, cleanup verified", resp)
	}
	assertGone(t, e, id)

	// No stdin at all: EOF at once.
	id = newRunID(t, e, "nostdin")
	resp, stdout, _, err = run(t, b, spec(e, pack, id, "sh", "-c", "cat; echo done"), "")
	if err != nil || resp.ExitCode != 0 || stdout != "done\n" {
		t.Fatalf("without stdin: %+v %q %v", resp, stdout, err)
	}
	assertGone(t, e, id)
}

// TestRunTimeout: killed at the timeout, reported, 137, and gone.
func TestRunTimeout(t *testing.T) {
	e := testEnv(t)
	b := newTestBackend(t, e)
	id := newRunID(t, e, "timeout")
	s := spec(e, packDir(t), id, "sleep", "1000")
	s.Timeout = 500 * time.Millisecond
	start := time.Now()
	resp, _, _, err := run(t, b, s, "")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !resp.TimedOut || !resp.Killed || resp.ExitCode != 137 || !resp.CleanupVerified {
		t.Fatalf("resp %+v, want timed out, killed, 137, cleanup verified", resp)
	}
	// Killed (the sleep would run 1000 s), and not before the timeout.
	if d := time.Since(start); d < s.Timeout {
		t.Errorf("returned after %v, before its %v timeout", d, s.Timeout)
	}
	assertGone(t, e, id)
}

// TestRunCancel: a cancelled context kills the run, Run answers with a
// killed, cleanup-verified response, and the container is gone.
func TestRunCancel(t *testing.T) {
	e := testEnv(t)
	b := newTestBackend(t, e)
	id := newRunID(t, e, "cancel")
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("the host went away")
	time.AfterFunc(700*time.Millisecond, func() { cancel(cause) })
	resp, err := b.Run(ctx, &sandbox.RunRequest{Spec: spec(e, packDir(t), id, "sleep", "1000")})
	if err != nil || resp == nil || !resp.Killed || !resp.CleanupVerified {
		t.Fatalf("Run = %+v, %v; want a killed run with cleanup verified", resp, err)
	}
	assertGone(t, e, id)

	// Already cancelled: nothing is created.
	id = newRunID(t, e, "cancelled")
	if _, err := b.Run(ctx, &sandbox.RunRequest{Spec: spec(e, packDir(t), id, "true")}); !errors.Is(err, cause) {
		t.Fatalf("Run with a done ctx: %v", err)
	}
	assertGone(t, e, id)
}

// TestRunCancelDuringSetup cancels at points spread over create, inspect,
// attach and start: whenever the cancellation lands, the run is answered
// as killed with its cleanup proven (or, cancelled before anything was
// created, refused with the cause), and nothing is left behind.
func TestRunCancelDuringSetup(t *testing.T) {
	e := testEnv(t)
	b := newTestBackend(t, e)
	for _, after := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond,
		50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		id := newRunID(t, e, "setup-cancel")
		ctx, cancel := context.WithCancelCause(t.Context())
		cause := errors.New("the host went away")
		time.AfterFunc(after, func() { cancel(cause) })
		resp, err := b.Run(ctx, &sandbox.RunRequest{Spec: spec(e, packDir(t), id, "sleep", "1000")})
		switch {
		case err != nil && errors.Is(err, cause) && resp == nil:
		case err == nil && resp != nil && resp.Killed && resp.CleanupVerified:
		default:
			t.Errorf("cancel after %v: Run = %+v, %v; want killed with cleanup verified", after, resp, err)
		}
		assertGone(t, e, id)
		cancel(nil)
	}
}

// TestRunRefusals: bad input never reaches the engine, a missing image is
// not pulled, and a name in use is left alone.
func TestRunRefusals(t *testing.T) {
	e := testEnv(t)
	b := newTestBackend(t, e)
	pack := packDir(t)
	for name, mutate := range map[string]func(*sandbox.Spec){
		"run id with a slash":   func(s *sandbox.Spec) { s.RunID = "a/b" },
		"empty run id":          func(s *sandbox.Spec) { s.RunID = "" },
		"image by tag":          func(s *sandbox.Spec) { s.Image = "busybox:latest" },
		"image by id":           func(s *sandbox.Spec) { s.Image = e.img.ConfigDigest },
		"image not in store":    func(s *sandbox.Spec) { s.Image = "agentnode/sandbox@sha256:" + strings.Repeat("e", 64) },
		"no image store":        func(s *sandbox.Spec) { s.ImageStore = "" },
		"relative image store":  func(s *sandbox.Spec) { s.ImageStore = "images" },
		"no args":               func(s *sandbox.Spec) { s.Args = nil },
		"relative package dir":  func(s *sandbox.Spec) { s.PackageDir = "pack" },
		"env overriding HOME":   func(s *sandbox.Spec) { s.Env = []string{"HOME=/"} },
		"negative memory":       func(s *sandbox.Spec) { s.Limits.MemoryBytes = -1 },
		"package dir with sock": func(s *sandbox.Spec) { s.PackageDir = e.dir },
	} {
		t.Run(name, func(t *testing.T) {
			id := newRunID(t, e, "refuse")
			s := spec(e, pack, id, "true")
			mutate(&s)
			if resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s}); err == nil {
				t.Fatalf("Run succeeded: %+v", resp)
			} else {
				t.Logf("refused: %v", err)
			}
			assertGone(t, e, id)
		})
	}

	t.Run("image missing", func(t *testing.T) {
		id := newRunID(t, e, "noimage")
		s := spec(e, pack, id, "true")
		// A verified manifest naming a config the engine does not have.
		s.ImageStore, s.Image = sandboxtest.FakeImageStore(t, "sha256:"+strings.Repeat("7", 64))
		_, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: s})
		if err == nil || !strings.Contains(err.Error(), "never pulled") {
			t.Fatalf("Run with a missing image: %v", err)
		}
		assertGone(t, e, id)
	})

	t.Run("name in use", func(t *testing.T) {
		id := newRunID(t, e, "taken")
		other, err := e.cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{
			Name:   namePrefix + id,
			Config: &container.Config{Image: e.img.ConfigDigest, Cmd: []string{"true"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Run(t.Context(), &sandbox.RunRequest{Spec: spec(e, pack, id, "true")})
		if err == nil || !strings.Contains(err.Error(), "already in use") {
			t.Fatalf("Run with its name taken: %v", err)
		}
		if _, err := e.cli.ContainerInspect(t.Context(), other.ID, client.ContainerInspectOptions{}); err != nil {
			t.Fatalf("the other container was touched: %v", err)
		}
	})
}

// TestRunHardeningStored: what the engine stored for a run is what
// verifyCreated accepts, and verifyCreated refuses each weakening.
func TestRunHardeningStored(t *testing.T) {
	e := testEnv(t)
	id := newRunID(t, e, "stored")
	s := spec(e, packDir(t), id, "true")
	cs, err := containerConfig(s, e.img.ConfigDigest, "owner")
	if err != nil {
		t.Fatal(err)
	}
	created, err := e.cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{Config: cs.config, HostConfig: cs.host, Name: cs.name})
	if err != nil {
		t.Fatal(err)
	}
	if len(created.Warnings) > 0 {
		t.Errorf("engine warnings: %v", created.Warnings)
	}
	r, err := e.cli.ContainerInspect(t.Context(), created.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyCreated(cs, &r.Container); err != nil {
		t.Fatalf("verifyCreated on what the engine stored: %v", err)
	}
	for name, weaken := range map[string]func(*container.InspectResponse){
		"privileged":      func(c *container.InspectResponse) { c.HostConfig.Privileged = true },
		"writable root":   func(c *container.InspectResponse) { c.HostConfig.ReadonlyRootfs = false },
		"cap added":       func(c *container.InspectResponse) { c.HostConfig.CapAdd = []string{"CAP_SYS_ADMIN"} },
		"seccomp dropped": func(c *container.InspectResponse) { c.HostConfig.SecurityOpt = []string{"no-new-privileges"} },
		"unconfined": func(c *container.InspectResponse) {
			c.HostConfig.SecurityOpt = append(c.HostConfig.SecurityOpt, "apparmor=unconfined")
		},
		"swap unlimited": func(c *container.InspectResponse) { c.HostConfig.MemorySwap = -1 },
		"no pids limit":  func(c *container.InspectResponse) { c.HostConfig.PidsLimit = nil },
		"host network":   func(c *container.InspectResponse) { c.HostConfig.NetworkMode = "host" },
		"host pid":       func(c *container.InspectResponse) { c.HostConfig.PidMode = "host" },
		"extra bind":     func(c *container.InspectResponse) { c.HostConfig.Binds = []string{"/var/run/docker.sock:/s"} },
		"root user":      func(c *container.InspectResponse) { c.Config.User = "0:0" },
		"other image":    func(c *container.InspectResponse) { c.Image = "sha256:" + strings.Repeat("e", 64) },
		"tmp exec": func(c *container.InspectResponse) {
			c.HostConfig.Tmpfs = map[string]string{"/tmp": "size=1g", "/sandbox-home": c.HostConfig.Tmpfs["/sandbox-home"]}
		},
		"unmasked": func(c *container.InspectResponse) { c.HostConfig.MaskedPaths = []string{} },
	} {
		r2, err := e.cli.ContainerInspect(t.Context(), created.ID, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		weaken(&r2.Container)
		if err := verifyCreated(cs, &r2.Container); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	b := newTestBackend(t, e)
	if err := b.removeAndVerify(id, created.ID, ""); err != nil {
		t.Fatal(err)
	}
	assertGone(t, e, id)
}

// TestCleanupFindsLeftovers: removeAndVerify without an id finds the
// container by name, and also removes a stray one carrying the run's label.
func TestCleanupFindsLeftovers(t *testing.T) {
	e := testEnv(t)
	b := newTestBackend(t, e)
	id := newRunID(t, e, "stray")
	for _, name := range []string{namePrefix + id, namePrefix + id + "-twin"} {
		if _, err := e.cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{
			Name:   name,
			Config: &container.Config{Image: e.img.ConfigDigest, Cmd: []string{"sleep", "100"}, Labels: map[string]string{runLabel: id}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.removeAndVerify(id, "", ""); err != nil {
		t.Fatal(err)
	}
	assertGone(t, e, id)
}

// TestReapOrphans: a container whose owner process is dead is removed; one
// whose owner lives, or cannot be judged, is not.
func TestReapOrphans(t *testing.T) {
	e := testEnv(t)
	b := newTestBackend(t, e)
	prefix, _, _ := cutLast(b.owner, "/")
	// A plugin process that has exited.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead := prefix + "/" + strconv.Itoa(gone.ProcessState.Pid()) + ":1"
	owners := map[string]string{
		"dead":      dead,
		"alive":     b.owner,
		"elsewhere": "other-boot/pid:[1]/1:0",
	}
	ids := map[string]string{}
	for what, owner := range owners {
		id := newRunID(t, e, "reap-"+what)
		ids[what] = id
		if _, err := e.cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{
			Name:   namePrefix + id,
			Config: &container.Config{Image: e.img.ConfigDigest, Cmd: []string{"true"}, Labels: map[string]string{runLabel: id, ownerLabel: owner}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := b.reapOrphans(t.Context())
	if err != nil || n != 1 {
		t.Fatalf("reapOrphans = %d, %v; want 1", n, err)
	}
	assertGone(t, e, ids["dead"])
	for _, what := range []string{"alive", "elsewhere"} {
		if _, err := e.cli.ContainerInspect(t.Context(), namePrefix+ids[what], client.ContainerInspectOptions{}); err != nil {
			t.Errorf("the %s owner's container was removed: %v", what, err)
		}
	}
}

// TestPluginBinary launches the built binary the way agentnode does
// (go-plugin, gRPC only, SHA-256 pinned), pointed at the private engine by
// its host file, and runs a stdin → stdout round trip and a timeout
// through it.
func TestPluginBinary(t *testing.T) {
	e := testEnv(t)
	bin := buildPlugin(t, e)
	c := sandboxtest.LaunchPlugin(t, bin)
	inf, err := c.Info(t.Context())
	if err != nil || inf.Name != "docker" || inf.Kind != "sandbox" {
		t.Fatalf("Info = %+v, %v", inf, err)
	}
	av, err := c.Availability(t.Context(), &sandbox.AvailabilityRequest{Image: e.img.Ref})
	if err != nil || !av.Available || !strings.Contains(av.Detail, e.host) {
		t.Fatalf("Availability = %+v, %v", av, err)
	}
	pack := packDir(t)
	id := newRunID(t, e, "bin")
	var stdout, stderr bytes.Buffer
	resp, err := c.Run(t.Context(), &sandbox.RunRequest{
		Spec:   spec(e, pack, id, "sh", "-c", "cat; id -u"),
		Stdin:  strings.NewReader("through the binary\n"),
		Stdout: &stdout, Stderr: &stderr,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if resp.ExitCode != 0 || stdout.String() != "through the binary\n1000\n" || !resp.CleanupVerified {
		t.Fatalf("resp %+v stdout %q stderr %q", resp, stdout.String(), stderr.String())
	}
	assertGone(t, e, id)

	id = newRunID(t, e, "bin")
	s := spec(e, pack, id, "sleep", "1000")
	s.Timeout = 300 * time.Millisecond
	resp, err = c.Run(t.Context(), &sandbox.RunRequest{Spec: s})
	if err != nil || !resp.TimedOut || !resp.Killed || !resp.CleanupVerified {
		t.Fatalf("timeout run: %+v, %v", resp, err)
	}
	assertGone(t, e, id)

	// Without its host file the binary uses the default socket.
	if err := os.Rename(bin+HostFileSuffix, bin+HostFileSuffix+".off"); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(bin+HostFileSuffix+".off", bin+HostFileSuffix)
	c2 := sandboxtest.LaunchPlugin(t, bin)
	av, err = c2.Availability(t.Context(), &sandbox.AvailabilityRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, statErr := os.Stat("/var/run/docker.sock"); statErr != nil && (av.Available || !strings.Contains(av.Detail, "/var/run/docker.sock")) {
		t.Fatalf("without a host file: %+v, want the default socket reported missing", av)
	}
	t.Logf("without a host file: %+v", av)
}

// TestRunConcurrent: one backend serves concurrent runs (as the plugin
// does), each with its own output and its own proven cleanup.
func TestRunConcurrent(t *testing.T) {
	e := testEnv(t)
	b := newTestBackend(t, e)
	pack := packDir(t)
	const n = 4
	errs := make(chan error, n+1)
	for i := range n {
		id := newRunID(t, e, "conc")
		go func() {
			var stdout bytes.Buffer
			resp, err := b.Run(t.Context(), &sandbox.RunRequest{
				Spec:   spec(e, pack, id, "sh", "-c", "cat; exit "+strconv.Itoa(i)),
				Stdin:  strings.NewReader(id),
				Stdout: &stdout,
			})
			switch {
			case err != nil:
				errs <- err
			case resp.ExitCode != i || stdout.String() != id || !resp.CleanupVerified:
				errs <- fmt.Errorf("run %d: %+v %q", i, resp, stdout.String())
			default:
				errs <- nil
			}
		}()
	}
	// The host asks Availability while runs are in flight.
	go func() {
		resp, err := b.Availability(t.Context(), &sandbox.AvailabilityRequest{Image: e.img.Ref})
		if err == nil && !resp.Available {
			err = fmt.Errorf("availability during runs: %+v", resp)
		}
		errs <- err
	}()
	for range n + 1 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestBinaryByHand: started without the handshake cookie the binary refuses
// and writes nothing to stdout (go-plugin's handshake line lives there).
func TestBinaryByHand(t *testing.T) {
	e := testEnv(t)
	cmd := exec.Command(buildPlugin(t, e))
	cmd.Env = []string{}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("the plugin ran by hand")
	}
	if stdout.Len() != 0 {
		t.Fatalf("wrote to stdout: %q", stdout.String())
	}
	if !strings.Contains(stderr.String(), "agentnode plugin") {
		t.Fatalf("stderr %q", stderr.String())
	}
}

// TestReapRun: the reaper's Reap (run in the reaper process when the plugin
// died or hung) kills the armed container at its deadline without removing
// it, and removes it and proves it gone once the plugin is gone.
func TestReapRun(t *testing.T) {
	e := testEnv(t)
	id := newRunID(t, e, "reaprun")
	created, err := e.cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{
		Name:   namePrefix + id,
		Config: &container.Config{Image: e.img.ConfigDigest, Cmd: []string{"sleep", "1000"}, Labels: map[string]string{runLabel: id}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cli.ContainerStart(t.Context(), created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	target, err := json.Marshal(reapTarget{Host: e.host, RunID: id, ID: created.ID})
	if err != nil {
		t.Fatal(err)
	}
	if err := reapRun(t.Context(), target, false); err != nil {
		t.Fatalf("reapRun(final=false) = %v", err)
	}
	got, err := e.cli.ContainerInspect(t.Context(), created.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("a non-final reap removed the container: %v", err)
	}
	if st := got.Container.State; st == nil || st.Running || st.ExitCode != 137 {
		t.Fatalf("after the deadline reap the container is %+v, want killed (137)", st)
	}
	if err := reapRun(t.Context(), target, true); err != nil {
		t.Fatalf("reapRun(final=true) = %v", err)
	}
	assertGone(t, e, id)
	if err := reapRun(t.Context(), target, true); err != nil {
		t.Fatalf("reapRun of a removed container = %v", err)
	}
	bad, _ := json.Marshal(reapTarget{Host: "tcp://example:2375", RunID: id, ID: created.ID})
	if err := reapRun(t.Context(), bad, true); err == nil {
		t.Fatal("a tcp:// engine was accepted")
	}
}

// TestOOMKillReported: a shell that doubles a string until the container's
// memory limit stops it is reported OOMKilled (the engine's
// State.OOMKilled); the controls, a process killed by another SIGKILL (the
// timeout) and one that exits by itself, are not.
func TestOOMKillReported(t *testing.T) {
	e := testEnv(t)
	b := newTestBackend(t, e)
	pack := packDir(t)

	id := newRunID(t, e, "oom")
	s := spec(e, pack, id, "sh", "-c", `a=x; while :; do a="$a$a"; done`)
	s.Limits.MemoryBytes = 64 << 20
	s.Timeout = time.Minute // a backstop only: the limit must end it
	resp, _, stderr, err := run(t, b, s, "")
	if err != nil {
		t.Fatalf("memory bomb: Run: %v", err)
	}
	if !resp.OOMKilled || !resp.Killed || resp.ExitCode != 137 || resp.TimedOut || !resp.CleanupVerified {
		t.Fatalf("memory bomb: response %+v, stderr %q", resp, stderr)
	}
	assertGone(t, e, id)

	id = newRunID(t, e, "oomtimeout")
	s = spec(e, pack, id, "sleep", "1000")
	s.Limits.MemoryBytes = 64 << 20
	s.Timeout = 300 * time.Millisecond
	if resp, _, _, err = run(t, b, s, ""); err != nil || resp.OOMKilled || !resp.TimedOut || resp.ExitCode != 137 {
		t.Fatalf("timeout: response %+v, %v", resp, err)
	}
	assertGone(t, e, id)

	id = newRunID(t, e, "oomexit")
	s = spec(e, pack, id, "sh", "-c", "exit 7")
	s.Limits.MemoryBytes = 64 << 20
	if resp, _, _, err = run(t, b, s, ""); err != nil || resp.OOMKilled || resp.Killed || resp.ExitCode != 7 {
		t.Fatalf("plain exit: response %+v, %v", resp, err)
	}
	assertGone(t, e, id)
}
