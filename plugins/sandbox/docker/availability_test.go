package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/system"

	"github.com/agentnode/agentnode/sdk/sandbox"
)

// runHelper is the test binary re-executed as a helper process.
// "availability": ask Availability of the engine at $AGENTNODE_DOCKER_TEST_SOCKET
// and print the answer as JSON (used to run it as another uid).
func runHelper(mode string) int {
	switch mode {
	case "availability":
		ep, err := parseHost("unix://"+os.Getenv("AGENTNODE_DOCKER_TEST_SOCKET"), "test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		b := newBackend(nil, ep, nil)
		resp, err := b.Availability(context.Background(), &sandbox.AvailabilityRequest{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		_ = json.NewEncoder(os.Stdout).Encode(resp)
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown helper %q\n", mode)
	return 2
}

func backendAt(socket string) *backend {
	ep, err := parseHost("unix://"+socket, "test")
	if err != nil {
		panic(err)
	}
	b := newBackend(nil, ep, nil)
	b.dockerdPaths = nil
	return b
}

func wantUnavailable(t *testing.T, b *backend, req *sandbox.AvailabilityRequest, reason, detailPart string) {
	t.Helper()
	resp, err := b.Availability(t.Context(), req)
	if err != nil {
		t.Fatalf("Availability: %v", err)
	}
	if resp.Available || resp.Reason != reason || !strings.Contains(resp.Detail, detailPart) {
		t.Fatalf("Availability = %+v, want reason %s with detail containing %q", resp, reason, detailPart)
	}
	t.Logf("%s: %s", resp.Reason, resp.Detail)
}

// TestAvailabilitySocket: the socket file missing (with and without a
// dockerd installed), a socket nobody listens on, and a file that is not a
// socket. No engine needed.
func TestAvailabilitySocket(t *testing.T) {
	dir := t.TempDir()
	t.Run("missing, no dockerd", func(t *testing.T) {
		wantUnavailable(t, backendAt(filepath.Join(dir, "none.sock")), &sandbox.AvailabilityRequest{}, sandbox.ReasonNotInstalled, "does not exist")
	})
	t.Run("missing, dockerd installed", func(t *testing.T) {
		fake := filepath.Join(dir, "dockerd")
		if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		b := backendAt(filepath.Join(dir, "none.sock"))
		b.dockerdPaths = []string{filepath.Join(dir, "absent"), fake}
		wantUnavailable(t, b, &sandbox.AvailabilityRequest{}, sandbox.ReasonNotRunning, "installed at "+fake)
	})
	t.Run("connection refused", func(t *testing.T) {
		sock := filepath.Join(dir, "stale.sock")
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		l.SetUnlinkOnClose(false) // a stale socket: dockerd died
		l.Close()
		wantUnavailable(t, backendAt(sock), &sandbox.AvailabilityRequest{}, sandbox.ReasonNotRunning, "refuses connections")
	})
	t.Run("not a socket", func(t *testing.T) {
		f := filepath.Join(dir, "file.sock")
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		wantUnavailable(t, backendAt(f), &sandbox.AvailabilityRequest{}, sandbox.ReasonNotRunning, "not a socket")
	})
	t.Run("bad host file", func(t *testing.T) {
		b := newBackend(nil, endpoint{}, fmt.Errorf("host file x: names 2 endpoints"))
		if _, err := b.Availability(t.Context(), &sandbox.AvailabilityRequest{}); err == nil || !strings.Contains(err.Error(), "2 endpoints") {
			t.Fatalf("Availability with a bad host file: %v", err)
		}
	})
}

// fakeEngine serves a minimal Engine API on a unix socket: /_ping with the
// given API version, /info, and image inspect of the images in images.
func fakeEngine(t *testing.T, apiVersion string, info system.Info, infoStatus int, images map[string]string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "andk-fake-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "e.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Api-Version", apiVersion)
		w.Header().Set("Ostype", "linux")
		_, _ = io.WriteString(w, "OK")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		p := r.URL.Path
		if i := strings.Index(p[1:], "/"); strings.HasPrefix(p, "/v") && i > 0 {
			p = p[i+1:]
		}
		switch {
		case p == "/info":
			if infoStatus != http.StatusOK {
				w.WriteHeader(infoStatus)
				_, _ = io.WriteString(w, `{"message":"denied by the authorization plugin"}`)
				return
			}
			_ = json.NewEncoder(w).Encode(info)
		case strings.HasPrefix(p, "/images/") && strings.HasSuffix(p, "/json"):
			ref := strings.TrimSuffix(strings.TrimPrefix(p, "/images/"), "/json")
			if id, ok := images[ref]; ok {
				fmt.Fprintf(w, `{"Id":%q,"Os":"linux","Architecture":"amd64"}`, id)
				return
			}
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"message":"No such image: %s"}`, ref)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"message":"not implemented by the fake"}`)
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}

func goodInfo() system.Info {
	return system.Info{
		ServerVersion: "20.10.24-fake", OSType: "linux", Architecture: "x86_64",
		MemoryLimit: true, SwapLimit: true, PidsLimit: true, CPUCfsQuota: true, CPUCfsPeriod: true,
		SecurityOptions: []string{"name=seccomp,profile=default"},
	}
}

// TestAvailabilityFakeEngine: what the engine says decides incompatible,
// not_permitted, image_missing and available.
func TestAvailabilityFakeEngine(t *testing.T) {
	const ref = "agentnode/sandbox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	const tag = "agentnode/sandbox:0123456789ab"
	noSwap, noSeccomp, arm := goodInfo(), goodInfo(), goodInfo()
	noSwap.SwapLimit = false
	noSeccomp.SecurityOptions = []string{"name=rootless"}
	arm.Architecture = "aarch64"
	for _, tc := range []struct {
		name       string
		api        string
		info       system.Info
		infoStatus int
		images     map[string]string
		image      string
		reason     string // "" = available
		detail     string
	}{
		{name: "API 1.40 too old", api: "1.40", info: goodInfo(), reason: sandbox.ReasonIncompatible, detail: "API 1.40"},
		{name: "API 1.24 too old", api: "1.24", info: goodInfo(), reason: sandbox.ReasonIncompatible, detail: "API 1.24"},
		{name: "no swap limit", api: "1.41", info: noSwap, reason: sandbox.ReasonIncompatible, detail: "swap limits"},
		{name: "no seccomp", api: "1.41", info: noSeccomp, reason: sandbox.ReasonIncompatible, detail: "seccomp"},
		{name: "not x86_64", api: "1.41", info: arm, reason: sandbox.ReasonIncompatible, detail: "aarch64"},
		{name: "info forbidden", api: "1.41", info: goodInfo(), infoStatus: http.StatusForbidden, reason: sandbox.ReasonNotPermitted, detail: "authorization"},
		{name: "image missing", api: "1.41", info: goodInfo(), image: ref, reason: sandbox.ReasonImageMissing, detail: tag},
		{name: "image id missing", api: "1.41", info: goodInfo(), image: "sha256:" + strings.Repeat("ab", 32), reason: sandbox.ReasonImageMissing, detail: "not in the engine"},
		{name: "image loaded under its tag", api: "1.41", info: goodInfo(), image: ref, images: map[string]string{tag: "sha256:feed"}, detail: "present as " + tag},
		{name: "image by digest", api: "1.41", info: goodInfo(), image: ref, images: map[string]string{ref: "sha256:feed"}, detail: "present as " + ref},
		{name: "newer API", api: "1.52", info: goodInfo(), detail: "no image asked about"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status := tc.infoStatus
			if status == 0 {
				status = http.StatusOK
			}
			b := backendAt(fakeEngine(t, tc.api, tc.info, status, tc.images))
			defer b.close()
			req := &sandbox.AvailabilityRequest{Image: tc.image}
			if tc.reason != "" {
				wantUnavailable(t, b, req, tc.reason, tc.detail)
				return
			}
			resp, err := b.Availability(t.Context(), req)
			if err != nil || !resp.Available || !strings.Contains(resp.Detail, tc.detail) {
				t.Fatalf("Availability = %+v, %v; want available with %q", resp, err, tc.detail)
			}
		})
	}
}

// TestAvailabilityReal: the private engine with the loaded image is
// available; an image it does not have is image_missing.
func TestAvailabilityReal(t *testing.T) {
	e := testEnv(t)
	b := newTestBackend(t, e)
	resp, err := b.Availability(t.Context(), &sandbox.AvailabilityRequest{Image: e.img.Ref, ImageStore: e.img.Store})
	if err != nil || !resp.Available {
		t.Fatalf("Availability(%s) = %+v, %v", e.img.Ref, resp, err)
	}
	t.Logf("available: %s", resp.Detail)
	other := "agentnode/sandbox@sha256:" + strings.Repeat("5", 64)
	wantUnavailable(t, b, &sandbox.AvailabilityRequest{Image: other}, sandbox.ReasonImageMissing, "not in the engine")
	wantUnavailable(t, b, &sandbox.AvailabilityRequest{Image: "sha256:" + strings.Repeat("5", 64)}, sandbox.ReasonImageMissing, "not in the engine")
	// The image ID itself (the config digest) is found.
	resp, err = b.Availability(t.Context(), &sandbox.AvailabilityRequest{Image: e.img.ConfigDigest})
	if err != nil || !resp.Available {
		t.Fatalf("Availability(%s) = %+v, %v", e.img.ConfigDigest, resp, err)
	}
}

// TestAvailabilityNotPermitted asks as uid 65534, whom the engine socket
// (root, mode 0660) refuses.
func TestAvailabilityNotPermitted(t *testing.T) {
	e := testEnv(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "helper.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for p := dir; p != "/"; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o001 == 0 {
			_ = os.Chmod(p, fi.Mode().Perm()|0o001)
		}
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{helperEnv + "=availability", "AGENTNODE_DOCKER_TEST_SOCKET=" + e.socket}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper as uid 65534: %v\n%s", err, stderr.String())
	}
	var resp sandbox.AvailabilityResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	if resp.Available || resp.Reason != sandbox.ReasonNotPermitted || !strings.Contains(resp.Detail, "permission denied") {
		t.Fatalf("as uid 65534: %+v, want not_permitted (permission denied)", resp)
	}
	t.Logf("%s: %s", resp.Reason, resp.Detail)
}

// TestGVisorProblem: the engine runs gVisor only when runsc is registered
// under GVisorRuntime with every one of GVisorRuntimeArgs.
func TestGVisorProblem(t *testing.T) {
	reg := func(path string, args ...string) *system.Info {
		return &system.Info{Runtimes: map[string]system.RuntimeWithStatus{
			"runc":        {Runtime: system.Runtime{Path: "runc"}},
			GVisorRuntime: {Runtime: system.Runtime{Path: path, Args: args}},
		}}
	}
	for _, c := range []struct {
		name string
		info *system.Info
		ok   bool
	}{
		{"not registered", &system.Info{Runtimes: map[string]system.RuntimeWithStatus{"runc": {Runtime: system.Runtime{Path: "runc"}}}}, false},
		{"another binary", reg("/usr/bin/runc", GVisorRuntimeArgs...), false},
		{"no flags", reg("/usr/bin/runsc"), false},
		{"no oci-seccomp", reg("/usr/bin/runsc", "--network=none", "--host-uds=open"), false},
		{"registered", reg("/usr/bin/runsc", append([]string{"--debug"}, GVisorRuntimeArgs...)...), true},
	} {
		if got := gvisorProblem(c.info); (got == "") != c.ok {
			t.Errorf("%s: gvisorProblem = %q, want ok %v", c.name, got, c.ok)
		}
	}
}
