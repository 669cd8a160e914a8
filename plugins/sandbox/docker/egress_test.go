package main

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/agentnode/agentnode/sdk/sandbox/profile"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// testEgressSocket is a real unix socket the sandbox user may connect to.
func testEgressSocket(t *testing.T) string { return sandboxtest.EgressSocket(t) }

// TestContainerConfigEgress: with an egress socket the container gets one
// more mount, a read-only non-recursive bind of the socket, the forwarder
// as entrypoint and the proxy environment; the network stays none.
func TestContainerConfigEgress(t *testing.T) {
	plain, err := containerConfig(testSpec(), testImageID, "me")
	if err != nil {
		t.Fatal(err)
	}
	run := testSpec()
	run.EgressSocket = testEgressSocket(t)
	cs, err := containerConfig(run, testImageID, "me")
	if err != nil {
		t.Fatal(err)
	}
	c, h := cs.config, cs.host
	if len(h.Mounts) != 2 || !reflect.DeepEqual(plain.host.Mounts, h.Mounts[:1]) {
		t.Fatalf("mounts %+v, want the package's then the socket's", h.Mounts)
	}
	m := h.Mounts[1]
	if m.Type != mount.TypeBind || m.Source != run.EgressSocket || m.Target != profile.EgressSocketPath || !m.ReadOnly ||
		m.BindOptions == nil || !m.BindOptions.NonRecursive || m.BindOptions.Propagation != mount.PropagationRPrivate {
		t.Errorf("egress mount %+v", m)
	}
	if !slices.Equal(c.Entrypoint, []string{profile.EgressForwarderPath}) ||
		!slices.Equal(c.Cmd, []string{"-listen", profile.EgressListenAddr, "-socket", profile.EgressSocketPath, "--", "/pack/tool", "--flag", "x"}) {
		t.Errorf("argv %q %q", c.Entrypoint, c.Cmd)
	}
	if !slices.Contains(c.Env, "HTTPS_PROXY="+profile.EgressProxyURL) || !slices.Contains(c.Env, "NO_PROXY=") {
		t.Errorf("env %q", c.Env)
	}
	if h.NetworkMode != "none" {
		t.Errorf("network %q with egress", h.NetworkMode)
	}
	// verifyCreated accepts exactly these mounts and nothing else.
	if err := verifyCreated(cs, inspectOf(cs)); err != nil {
		t.Errorf("verifyCreated of what was asked: %v", err)
	}
	for name, edit := range map[string]func([]mount.Mount) []mount.Mount{
		"socket dropped":   func(ms []mount.Mount) []mount.Mount { return ms[:1] },
		"socket writable":  func(ms []mount.Mount) []mount.Mount { ms[1].ReadOnly = false; return ms },
		"socket elsewhere": func(ms []mount.Mount) []mount.Mount { ms[1].Source = "/var/run/docker.sock"; return ms },
		"extra mount":      func(ms []mount.Mount) []mount.Mount { return append(ms, ms[1]) },
	} {
		got := inspectOf(cs)
		got.HostConfig.Mounts = edit(slices.Clone(got.HostConfig.Mounts))
		if err := verifyCreated(cs, got); err == nil || !strings.Contains(err.Error(), "mounts") {
			t.Errorf("%s: verifyCreated = %v", name, err)
		}
	}
}

// TestEgressRefusesEngineSocket: the engine's own socket, wherever it is,
// never becomes the egress socket.
func TestEgressRefusesEngineSocket(t *testing.T) {
	sock := testEgressSocket(t)
	b := &backend{ep: endpoint{socket: sock}}
	if err := b.checkEgressSocket(sock); err == nil || !strings.Contains(err.Error(), "engine socket") {
		t.Errorf("the engine socket as egress socket: %v", err)
	}
	if err := b.checkEgressSocket(testEgressSocket(t)); err != nil {
		t.Errorf("another socket: %v", err)
	}
	if err := b.checkEgressSocket(""); err != nil {
		t.Errorf("no egress: %v", err)
	}
}

// inspectOf is what an engine that stored cs faithfully reports.
func inspectOf(cs *containerSpec) *container.InspectResponse {
	h := *cs.host
	h.Mounts = slices.Clone(cs.host.Mounts)
	c := *cs.config
	return &container.InspectResponse{Image: cs.config.Image, HostConfig: &h, Config: &c}
}
