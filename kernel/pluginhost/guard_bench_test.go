package pluginhost

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/agentnode/agentnode/sdk/guard"
	"github.com/agentnode/agentnode/sdk/guard/schemacheck"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// buildBuiltinGuard builds the bundled Guard inspector into a bin
// directory of the benchmark's own (the go build cache makes repeats cheap).
func buildBuiltinGuard(b *testing.B) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), FileName(plugin.KindGuard, "builtin"))
	out, err := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", path,
		"github.com/agentnode/agentnode/plugins/guard/builtin").CombinedOutput()
	if err != nil {
		b.Fatalf("building the builtin inspector: %v\n%s", err, out)
	}
	return path
}

// benchInspectRequest is a typical tool call: a small input with a schema.
func benchInspectRequest() *guard.InspectRequest {
	req := &guard.InspectRequest{
		PackageID: "file-tools", Version: "1.2.0", Tool: "read_file", ActionTypes: []string{"read"},
		Permissions: guard.Permissions{NetworkLevel: "none", FilesystemLevel: "workspace_read", CodeExecutionLevel: "none"},
		InputJSON:   []byte(`{"path":"notes/today.txt","lines":20,"mode":"text"}`),
		InputSchemaJSON: []byte(`{"type":"object","required":["path"],"properties":{"path":{"type":"string","maxLength":255},` +
			`"lines":{"type":"integer","minimum":1},"mode":{"enum":["text","binary"]}}}`),
		TrustLevel: "verified",
	}
	// The host's validation, sent with every call as the kernel does.
	req.SchemaCheck = schemacheck.Check(req.InputSchemaJSON, req.InputJSON)
	return req
}

func benchInspect(b *testing.B, c *guard.Client) {
	req, ctx := benchInspectRequest(), context.Background()
	if _, err := c.Inspect(ctx, req); err != nil { // warm up: connection, schema cache
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp, err := c.Inspect(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.Verdict != guard.VerdictAllow {
			b.Fatalf("verdict %s %q", resp.Verdict, resp.Reasons)
		}
	}
}

// BenchmarkGuardInspect compares one call of the builtin inspector as the
// kernel makes it — through Host.Guard: the pinned binary started by
// go-plugin, gRPC over a unix socket with AutoMTLS — with a raw gRPC call
// to the same Guard service of the same binary in a subprocess, started by
// hand (no go-plugin client, no TLS). Goal: go-plugin ≤ 1.5× raw.
func BenchmarkGuardInspect(b *testing.B) {
	path := buildBuiltinGuard(b)
	b.Run("go-plugin", func(b *testing.B) {
		homeDir := b.TempDir()
		testPin(b, homeDir, path)
		h := New(Options{HomeDir: homeDir, BinDir: filepath.Dir(path), Logger: hclog.NewNullLogger()})
		b.Cleanup(h.Close)
		c, err := h.Guard(context.Background(), "builtin")
		if err != nil {
			b.Fatal(err)
		}
		benchInspect(b, c)
	})
	b.Run("raw-grpc-unix", func(b *testing.B) {
		benchInspect(b, rawGuardClient(b, path))
	})
}

// rawGuardClient starts the plugin binary itself, with only the handshake
// variables go-plugin's server needs, reads the address it announces on
// stdout and dials it with a bare, plaintext gRPC client.
func rawGuardClient(b *testing.B, path string) *guard.Client {
	cmd := exec.Command(path)
	cmd.Env = []string{
		plugin.Handshake.MagicCookieKey + "=" + plugin.Handshake.MagicCookieValue,
		"PLUGIN_PROTOCOL_VERSIONS=1",
		"PLUGIN_UNIX_SOCKET_DIR=" + b.TempDir(),
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	r := bufio.NewReader(stdout)
	line, err := r.ReadString('\n')
	if err != nil {
		b.Fatalf("handshake: %v", err)
	}
	go func() { _, _ = r.WriteTo(devNull{}) }()
	// CORE-VERSION|APP-VERSION|NETWORK|ADDR|PROTOCOL[|CERT]
	f := strings.Split(strings.TrimSpace(line), "|")
	if len(f) < 5 || f[2] != "unix" || f[4] != "grpc" {
		b.Fatalf("handshake line %q", line)
	}
	conn, err := grpc.NewClient("unix://"+f[3], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return guard.NewClient(conn)
}

type devNull struct{}

func (devNull) Write(p []byte) (int, error) { return len(p), nil }
