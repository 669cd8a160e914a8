package main

import (
	"fmt"

	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// rlimitNames are the rlimits whose host hard limit is read.
var rlimitNames = []string{"RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_FSIZE",
	"RLIMIT_LOCKS", "RLIMIT_MEMLOCK", "RLIMIT_MSGQUEUE", "RLIMIT_NICE", "RLIMIT_NOFILE", "RLIMIT_NPROC",
	"RLIMIT_RSS", "RLIMIT_RTPRIO", "RLIMIT_RTTIME", "RLIMIT_SIGPENDING", "RLIMIT_STACK"}

// hostHardLimits reads this process's hard limit of every resource once.
// The container never gets more than the host allows (RLIMIT_NOFILE cannot
// be raised on this kind of machine at all).
func hostHardLimits() (map[int]uint64, error) {
	m := make(map[int]uint64, len(rlimitNames))
	for _, name := range rlimitNames {
		res, _ := profile.RlimitResource(name)
		var rl unix.Rlimit
		if err := unix.Getrlimit(res, &rl); err != nil {
			return nil, fmt.Errorf("getrlimit %s: %w", name, err)
		}
		m[res] = rl.Max
	}
	return m, nil
}

// convertRlimits turns the spec's process rlimits into libcontainer's,
// clamped to the host's hard limits (specconv leaves rlimits to the caller).
func convertRlimits(in []specs.POSIXRlimit, hostHard map[int]uint64) ([]configs.Rlimit, error) {
	out := make([]configs.Rlimit, 0, len(in))
	for _, r := range in {
		res, ok := profile.RlimitResource(r.Type)
		if !ok {
			return nil, fmt.Errorf("unknown rlimit type %q", r.Type)
		}
		hard, soft := r.Hard, r.Soft
		if max, ok := hostHard[res]; ok && hard > max {
			hard = max
		}
		if soft > hard {
			soft = hard
		}
		out = append(out, configs.Rlimit{Type: res, Hard: hard, Soft: soft})
	}
	return out, nil
}
