package plugin

import (
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
