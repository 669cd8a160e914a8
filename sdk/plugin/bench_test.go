//go:build linux

package plugin_test

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"testing"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/agentnode/agentnode/sdk/internal/testeval"
	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/trust"
)

// benchRequest is a typical trust evaluation: one attestation, two keys.
func benchRequest() *trust.EvaluateRequest {
	att := make([]byte, 512)
	for i := range att {
		att[i] = byte('a' + i%26)
	}
	return &trust.EvaluateRequest{
		PackageID: "web-search", Version: "1.4.2",
		ArtifactHash: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Publisher:    "acme", Attestations: [][]byte{att},
		Keys:    []trust.Key{{ID: "k1", PublicKey: "MCowBQYDK2VwAyEA"}, {ID: "k2", PublicKey: "MCowBQYDK2VwAyEB"}},
		NowUnix: 1_700_000_000,
	}
}

func benchEvaluate(b *testing.B, c *trust.Client) {
	req := benchRequest()
	ctx := context.Background()
	if _, err := c.Evaluate(ctx, req); err != nil { // warm up the connection
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp, err := c.Evaluate(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.Level != trust.LevelVerified {
			b.Fatalf("level %q", resp.Level)
		}
	}
}

// BenchmarkPluginCall: one Evaluate through go-plugin to the real plugin
// subprocess (gRPC over a unix socket, AutoMTLS), as the kernel calls it.
func BenchmarkPluginCall(b *testing.B) {
	_, c, _ := startPlugin(b)
	benchEvaluate(b, c)
}

// BenchmarkRawGRPCUnix: the same Trust service and evaluator served
// in-process by a bare grpc.Server on a unix socket, plaintext: the floor
// that go-plugin's process boundary and mTLS are compared against.
func BenchmarkRawGRPCUnix(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "trust.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	s := grpc.NewServer()
	p := &trust.GRPCPlugin{Impl: testeval.Evaluator{}, Info: plugin.Info{Name: "raw"}}
	if err := p.GRPCServer(nil, s); err != nil {
		b.Fatal(err)
	}
	go func() { _ = s.Serve(l) }()
	b.Cleanup(s.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	benchEvaluate(b, trust.NewClient(conn))
}

// BenchmarkRawGRPCUnixSubprocess is a diagnostic: a bare gRPC client (no
// go-plugin client code, no TLS) calling the same plugin subprocess over its
// unix socket. Against BenchmarkRawGRPCUnix it isolates the cost of the
// process boundary; against BenchmarkPluginCall, that of go-plugin and mTLS.
func BenchmarkRawGRPCUnixSubprocess(b *testing.B) {
	cfg := hostConfig(trustVersions(), pluginSum, io.Discard)
	cfg.AutoMTLS = false // only here: the kernel always uses AutoMTLS
	pc := goplugin.NewClient(cfg)
	b.Cleanup(pc.Kill)
	if _, err := pc.Client(); err != nil {
		b.Fatal(err)
	}
	addr := pc.ReattachConfig().Addr
	conn, err := grpc.NewClient("unix://"+addr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	benchEvaluate(b, trust.NewClient(conn))
}
