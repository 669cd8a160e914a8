package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/agentnode/agentnode/sdk/guard"
	"github.com/agentnode/agentnode/sdk/plugin"
)

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// TestBinary builds the plugin and talks to it as the host does: a child
// process, the go-plugin handshake, gRPC only.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "agentnode-guard-builtin")
	if out, err := exec.Command(goTool(), "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	c := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  plugin.Handshake,
		VersionedPlugins: plugin.VersionedSet(plugin.KindGuard, &guard.GRPCPlugin{}),
		Cmd:              exec.Command(bin),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
	})
	defer c.Kill()
	rpc, err := c.Client()
	if err != nil {
		t.Fatalf("start plugin: %v", err)
	}
	raw, err := rpc.Dispense(plugin.KindGuard)
	if err != nil {
		t.Fatal(err)
	}
	client := raw.(*guard.Client)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inf, err := client.Info(ctx)
	if err != nil || inf.Name != "builtin" || inf.Kind != plugin.KindGuard {
		t.Fatalf("info %+v, %v", inf, err)
	}
	for input, want := range map[string]guard.Verdict{
		`{"path":"notes.txt"}`:  guard.VerdictAllow,
		`{"path":"../../etc"}`:  guard.VerdictDeny,
		`{"cmd":"ls; id"}`:      guard.VerdictPrompt,
		`{"path": `:             guard.VerdictDeny,
		`{"u":"http://x.test"}`: guard.VerdictDeny,
	} {
		resp, err := client.Inspect(ctx, &guard.InspectRequest{
			Tool:        "t",
			Permissions: guard.Permissions{NetworkLevel: "none"},
			InputJSON:   []byte(input),
		})
		if err != nil {
			t.Fatalf("%s: %v", input, err)
		}
		if resp.Verdict != want {
			t.Errorf("%s: got %s %q, want %s", input, resp.Verdict, resp.Reasons, want)
		}
	}
}
