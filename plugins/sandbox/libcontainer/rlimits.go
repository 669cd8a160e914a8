package main

import (
	"fmt"

	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// convertRlimits turns the spec's process rlimits into libcontainer's
// (specconv leaves rlimits to the caller). profile.ForRun has already
// lowered them to this process's hard limits.
func convertRlimits(in []specs.POSIXRlimit) ([]configs.Rlimit, error) {
	out := make([]configs.Rlimit, 0, len(in))
	for _, r := range in {
		res, ok := profile.RlimitResource(r.Type)
		if !ok {
			return nil, fmt.Errorf("unknown rlimit type %q", r.Type)
		}
		out = append(out, configs.Rlimit{Type: res, Hard: r.Hard, Soft: r.Soft})
	}
	return out, nil
}
