package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/agentnode/agentnode/sdk/guard"
	"github.com/agentnode/agentnode/sdk/plugin"
)

const (
	module  = "github.com/agentnode/agentnode"
	thisPkg = module + "/plugins/guard/builtin"
)

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// forbiddenDeps returns the packages of this module in deps that a bundled
// plugin may not use: anything but sdk/ and this plugin itself (kernel/,
// cmd/, other plugins/, ...). Test variants ("p [p.test]", "p.test") count
// as p.
func forbiddenDeps(deps []string) []string {
	var out []string
	for _, d := range deps {
		p := strings.Fields(d)[0]
		p = strings.TrimSuffix(p, ".test")
		if p != module && !strings.HasPrefix(p, module+"/") {
			continue
		}
		if p == thisPkg || strings.HasPrefix(p, module+"/sdk/") {
			continue
		}
		out = append(out, d)
	}
	return out
}

// TestImportsOnlySDK enforces the bundled-plugin rule over the whole build
// and test closure: nothing from kernel/, cmd/ or other plugins.
func TestImportsOnlySDK(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command(goTool(), "list", "-deps", "-test", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Split(strings.TrimSpace(string(out)), "\n")
	if !strings.Contains(string(out), module+"/sdk/guard") {
		t.Fatalf("go list output does not look like this plugin's closure:\n%s", out)
	}
	if bad := forbiddenDeps(deps); len(bad) > 0 {
		t.Errorf("the plugin depends on packages outside sdk/:\n  %s", strings.Join(bad, "\n  "))
	}
}

// TestForbiddenDeps checks the matcher, so that TestImportsOnlySDK can fail.
func TestForbiddenDeps(t *testing.T) {
	deps := []string{
		"fmt",
		"github.com/santhosh-tekuri/jsonschema/v6",
		module + "/sdk/guard",
		module + "/sdk/guard/guardtest",
		thisPkg,
		thisPkg + " [" + thisPkg + ".test]",
		thisPkg + ".test",
		module + "/kernel/policy",
		module + "/cmd/agentnode",
		module + "/plugins/trust/attest",
		module + "/plugins/guard/builtin/internal/x",
		module + "/test",
		module + "/sdk",
		"github.com/agentnode/agentnode2/kernel",
	}
	want := []string{
		module + "/kernel/policy",
		module + "/cmd/agentnode",
		module + "/plugins/trust/attest",
		module + "/plugins/guard/builtin/internal/x",
		module + "/test",
		module + "/sdk",
	}
	if got := forbiddenDeps(deps); !reflect.DeepEqual(got, want) {
		t.Fatalf("forbiddenDeps = %q, want %q", got, want)
	}
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
