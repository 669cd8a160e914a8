package plugin

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	pb "github.com/agentnode/agentnode/sdk/proto/agentnodev1"
)

// InfoToProto converts Info to its wire form, filling Kind and APIVersions
// when they are empty.
func InfoToProto(kind string, in Info) *pb.Info {
	if in.Kind == "" {
		in.Kind = kind
	}
	if len(in.APIVersions) == 0 {
		for _, v := range SupportedAPIVersions {
			in.APIVersions = append(in.APIVersions, uint32(v))
		}
	}
	return &pb.Info{Name: in.Name, Kind: in.Kind, Version: in.Version, ApiVersions: in.APIVersions}
}

// InfoFromProto converts the wire form of Info.
func InfoFromProto(p *pb.Info) Info {
	if p == nil {
		return Info{}
	}
	return Info{Name: p.GetName(), Kind: p.GetKind(), Version: p.GetVersion(), APIVersions: p.GetApiVersions()}
}

// InfoService is the Info RPC that every plugin kind's gRPC service has: it
// answers with the plugin's Info in wire form. A kind's server embeds it
// beside a struct that embeds the generated Unimplemented server, so that
// this Info, one level shallower, is the one that answers:
//
//	type server struct {
//		plugin.InfoService
//		unimplemented // struct{ pb.UnimplementedTrustServer }
//		…
//	}
type InfoService struct{ info *pb.Info }

// NewInfoService returns the Info service of a plugin of kind (InfoToProto
// fills Kind and APIVersions when in leaves them empty).
func NewInfoService(kind string, in Info) InfoService {
	return InfoService{info: InfoToProto(kind, in)}
}

// Info answers the Info RPC.
func (s InfoService) Info(context.Context, *pb.InfoRequest) (*pb.Info, error) { return s.info, nil }

// infoRPC is the Info call of every kind's generated client.
type infoRPC interface {
	Info(ctx context.Context, in *pb.InfoRequest, opts ...grpc.CallOption) (*pb.Info, error)
}

// InfoClient is the host side of the Info RPC; a kind's Client embeds it.
type InfoClient struct {
	kind string
	rpc  infoRPC
}

// NewInfoClient returns the Info client of a plugin of kind over rpc (the
// kind's generated client).
func NewInfoClient(kind string, rpc infoRPC) InfoClient { return InfoClient{kind: kind, rpc: rpc} }

// Info asks the plugin to describe itself. An error is "<kind> plugin:
// info: <cause>", wrapping the cause.
func (c InfoClient) Info(ctx context.Context) (Info, error) {
	i, err := c.rpc.Info(ctx, &pb.InfoRequest{})
	if err != nil {
		return Info{}, fmt.Errorf("%s plugin: info: %w", c.kind, err)
	}
	return InfoFromProto(i), nil
}
