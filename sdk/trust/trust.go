// Package trust is the plugin contract for trust evaluation: given a package
// version, its installed artifact hash and its attestations, say which trust
// tier it has. The kernel runs exactly one trust plugin per evaluation and
// treats any error as trust_unavailable (fail closed).
package trust

import (
	"context"
	"fmt"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/agentnode/agentnode/sdk/plugin"
	pb "github.com/agentnode/agentnode/sdk/proto/agentnodev1"
)

// Trust tiers, lowest first.
const (
	LevelUnknown    = "unknown"
	LevelUnverified = "unverified"
	LevelVerified   = "verified"
	LevelTrusted    = "trusted"
	LevelCurated    = "curated"
)

// Levels lists the tiers in ascending order.
var Levels = []string{LevelUnknown, LevelUnverified, LevelVerified, LevelTrusted, LevelCurated}

// Rank returns the position of level in Levels, or -1 if it is not a tier.
func Rank(level string) int {
	for i, l := range Levels {
		if l == level {
			return i
		}
	}
	return -1
}

// Key is a pinned issuer public key.
type Key struct {
	ID        string
	PublicKey string // raw Ed25519 key, base64 std encoding
}

// EvaluateRequest asks for the trust level of one package version.
type EvaluateRequest struct {
	PackageID    string
	Version      string
	ArtifactHash string // "sha256:<hex>"
	Publisher    string
	Attestations [][]byte
	Keys         []Key
	NowUnix      int64
}

// EvaluateResponse is the verdict of a trust plugin.
type EvaluateResponse struct {
	Level         string
	Issuer        string
	Reason        string
	ExpiresAtUnix int64
}

// Evaluator is implemented by trust plugins.
type Evaluator interface {
	Evaluate(ctx context.Context, req *EvaluateRequest) (*EvaluateResponse, error)
}

// GRPCPlugin adapts an Evaluator to go-plugin. Impl and Info are used on the
// plugin side; the host uses a zero GRPCPlugin.
type GRPCPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl Evaluator
	Info plugin.Info
}

// GRPCServer registers the Trust service.
func (p *GRPCPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterTrustServer(s, &server{InfoService: plugin.NewInfoService(plugin.KindTrust, p.Info), impl: p.Impl})
	return nil
}

// GRPCClient returns a *Client.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return newClient(pb.NewTrustClient(c)), nil
}

// Serve runs impl as a trust plugin process. See plugin.Serve.
func Serve(info plugin.Info, impl Evaluator) {
	plugin.Serve(&plugin.ServeConfig{Kind: plugin.KindTrust, Plugin: &GRPCPlugin{Impl: impl, Info: info}})
}

type server struct {
	plugin.InfoService
	unimplemented
	impl Evaluator
}

// unimplemented keeps the generated defaults one level below
// plugin.InfoService, whose Info answers.
type unimplemented struct{ pb.UnimplementedTrustServer }

func (s *server) Evaluate(ctx context.Context, r *pb.EvaluateRequest) (*pb.EvaluateResponse, error) {
	req := &EvaluateRequest{
		PackageID: r.GetPackageId(), Version: r.GetVersion(), ArtifactHash: r.GetArtifactHash(),
		Publisher: r.GetPublisher(), Attestations: r.GetAttestations(), NowUnix: r.GetNowUnix(),
	}
	for _, k := range r.GetKeys() {
		req.Keys = append(req.Keys, Key{ID: k.GetId(), PublicKey: k.GetPublicKey()})
	}
	resp, err := s.impl.Evaluate(ctx, req)
	if err != nil {
		return nil, err
	}
	if resp == nil {
		return nil, fmt.Errorf("trust plugin returned no response")
	}
	return &pb.EvaluateResponse{Level: resp.Level, Issuer: resp.Issuer, Reason: resp.Reason, ExpiresAtUnix: resp.ExpiresAtUnix}, nil
}

// Client is the host side of a trust plugin.
type Client struct {
	plugin.InfoClient // Info asks the plugin to describe itself.
	c                 pb.TrustClient
}

// NewClient wraps a gRPC connection to a Trust service.
func NewClient(cc grpc.ClientConnInterface) *Client { return newClient(pb.NewTrustClient(cc)) }

func newClient(c pb.TrustClient) *Client {
	return &Client{InfoClient: plugin.NewInfoClient(plugin.KindTrust, c), c: c}
}

// Evaluate calls the plugin. A level outside Levels is an error.
func (c *Client) Evaluate(ctx context.Context, req *EvaluateRequest) (*EvaluateResponse, error) {
	r := &pb.EvaluateRequest{
		PackageId: req.PackageID, Version: req.Version, ArtifactHash: req.ArtifactHash,
		Publisher: req.Publisher, Attestations: req.Attestations, NowUnix: req.NowUnix,
	}
	for _, k := range req.Keys {
		r.Keys = append(r.Keys, &pb.TrustKey{Id: k.ID, PublicKey: k.PublicKey})
	}
	resp, err := c.c.Evaluate(ctx, r)
	if err != nil {
		return nil, err
	}
	if Rank(resp.GetLevel()) < 0 {
		return nil, fmt.Errorf("trust plugin returned invalid level %q", resp.GetLevel())
	}
	return &EvaluateResponse{Level: resp.GetLevel(), Issuer: resp.GetIssuer(), Reason: resp.GetReason(), ExpiresAtUnix: resp.GetExpiresAtUnix()}, nil
}
