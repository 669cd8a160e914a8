package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// testEgressSocket is a real unix socket the sandbox user may connect to.
func testEgressSocket(t *testing.T) string { return sandboxtest.EgressSocket(t) }

// TestRunArgsEgress: egress adds exactly one --volume (the socket,
// read-only, not recursive), the forwarder as entrypoint and the proxy
// environment; the network stays none.
func TestRunArgsEgress(t *testing.T) {
	plain, err := runArgs(testSpec(t, nil), testParams())
	if err != nil {
		t.Fatal(err)
	}
	sock := testEgressSocket(t)
	args, err := runArgs(testSpec(t, func(r *sandbox.Spec) { r.EgressSocket = sock }), testParams())
	if err != nil {
		t.Fatal(err)
	}
	vols, plainVols := flagValues(args, "--volume"), flagValues(plain, "--volume")
	if len(vols) != len(plainVols)+1 || !slices.Equal(vols[:len(plainVols)], plainVols) {
		t.Fatalf("volumes %q, want %q plus the socket", vols, plainVols)
	}
	if want := sock + ":" + profile.EgressSocketPath + ":bind,ro,nosuid,nodev,noexec"; vols[len(vols)-1] != want {
		t.Errorf("socket volume %q, want %q", vols[len(vols)-1], want)
	}
	if ep := flagValues(args, "--entrypoint"); len(ep) != 1 || ep[0] != `["`+profile.EgressForwarderPath+`"]` {
		t.Errorf("entrypoint %q", ep)
	}
	i := slices.Index(args, testImageHex)
	if i < 0 || !slices.Equal(args[i+1:], []string{"-listen", profile.EgressListenAddr, "-socket", profile.EgressSocketPath, "--",
		"/pack/tool", "--flag", "a b", `["x"]`}) {
		t.Errorf("argv after the image %q", args[i+1:])
	}
	if env := flagValues(args, "--env"); !slices.Contains(env, "HTTPS_PROXY="+profile.EgressProxyURL) || !slices.Contains(env, "no_proxy=") {
		t.Errorf("env %q", env)
	}
	if n := flagValues(args, "--network"); !slices.Equal(n, []string{"none"}) {
		t.Errorf("network %q", n)
	}
	// A socket path podman's --volume cannot carry is refused, not mangled.
	s := testSpec(t, func(r *sandbox.Spec) { r.EgressSocket = sock })
	for i := range s.Mounts {
		if s.Mounts[i].Destination == profile.EgressSocketPath {
			s.Mounts[i].Source = "/tmp/a:b.sock"
		}
	}
	if _, err := runArgs(s, testParams()); err == nil || !strings.Contains(err.Error(), "EgressSocket") {
		t.Errorf("a socket path with ':': %v", err)
	}
}
