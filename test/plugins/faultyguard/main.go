// Command faultyguard is a Guard inspector plugin for fault-injection tests:
// it answers what a broken or hostile inspector would. It imports only sdk/,
// like any third-party plugin.
//
// The e2e build puts it in the extra directory as agentnode-trust-faultyguard
// (test plugins are built under the trust prefix); scripts install it as
// agentnode-guard-<name>. Plugins get no environment from the host, so the
// behaviour is chosen by a file next to the binary: "<binary path>.mode"
// holds one mode (default ok):
//
//	ok           Inspect abstains
//	deny         Inspect denies with the reason "faultyguard denies"
//	crash        Inspect exits the process with status 1
//	hang         Inspect blocks forever, ignoring its context
//	error        Inspect returns an error
//	malformed    Inspect answers verdict 99, which is no verdict
//	unspecified  Inspect answers VERDICT_UNSPECIFIED (a missing verdict)
package main

import (
	"context"
	"errors"
	"os"
	"strings"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/agentnode/agentnode/sdk/plugin"
	pb "github.com/agentnode/agentnode/sdk/proto/agentnodev1"
)

func main() {
	mode := "ok"
	if exe, err := os.Executable(); err == nil {
		if b, err := os.ReadFile(exe + ".mode"); err == nil && strings.TrimSpace(string(b)) != "" {
			mode = strings.TrimSpace(string(b))
		}
	}
	info := plugin.InfoToProto(plugin.KindGuard, plugin.Info{Name: "faultyguard", Version: "0.0.0-test"})
	plugin.Serve(&plugin.ServeConfig{Kind: plugin.KindGuard, Plugin: &rawPlugin{srv: &server{mode: mode, info: info}}})
}

// rawPlugin serves the Guard service directly from the generated code,
// bypassing sdk/guard's checks, so it can send answers sdk/guard would
// refuse to send.
type rawPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	srv *server
}

func (p *rawPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterGuardServer(s, p.srv)
	return nil
}

func (p *rawPlugin) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("faultyguard: plugin side only")
}

type server struct {
	pb.UnimplementedGuardServer
	mode string
	info *pb.Info
}

func (s *server) Info(context.Context, *pb.InfoRequest) (*pb.Info, error) { return s.info, nil }

func (s *server) Inspect(_ context.Context, _ *pb.InspectRequest) (*pb.InspectResponse, error) {
	switch s.mode {
	case "deny":
		return &pb.InspectResponse{Verdict: pb.Verdict_VERDICT_DENY, Reasons: []string{"faultyguard denies"}}, nil
	case "crash":
		os.Exit(1)
	case "hang":
		select {}
	case "error":
		return nil, errors.New("faultyguard: inspector failed")
	case "malformed":
		return &pb.InspectResponse{Verdict: pb.Verdict(99), Reasons: []string{"?"}}, nil
	case "unspecified":
		return &pb.InspectResponse{}, nil
	}
	return &pb.InspectResponse{Verdict: pb.Verdict_VERDICT_ABSTAIN}, nil
}
