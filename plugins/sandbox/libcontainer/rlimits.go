package main

import (
	"fmt"

	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// rlimitTypes maps OCI rlimit names to resource numbers.
var rlimitTypes = map[string]int{
	"RLIMIT_AS":         unix.RLIMIT_AS,
	"RLIMIT_CORE":       unix.RLIMIT_CORE,
	"RLIMIT_CPU":        unix.RLIMIT_CPU,
	"RLIMIT_DATA":       unix.RLIMIT_DATA,
	"RLIMIT_FSIZE":      unix.RLIMIT_FSIZE,
	"RLIMIT_LOCKS":      unix.RLIMIT_LOCKS,
	"RLIMIT_MEMLOCK":    unix.RLIMIT_MEMLOCK,
	"RLIMIT_MSGQUEUE":   unix.RLIMIT_MSGQUEUE,
	"RLIMIT_NICE":       unix.RLIMIT_NICE,
	"RLIMIT_NOFILE":     unix.RLIMIT_NOFILE,
	"RLIMIT_NPROC":      unix.RLIMIT_NPROC,
	"RLIMIT_RSS":        unix.RLIMIT_RSS,
	"RLIMIT_RTPRIO":     unix.RLIMIT_RTPRIO,
	"RLIMIT_RTTIME":     unix.RLIMIT_RTTIME,
	"RLIMIT_SIGPENDING": unix.RLIMIT_SIGPENDING,
	"RLIMIT_STACK":      unix.RLIMIT_STACK,
}

// hostHardLimits reads this process's hard limit of every resource once.
// The container never gets more than the host allows (RLIMIT_NOFILE cannot
// be raised on this kind of machine at all).
func hostHardLimits() (map[int]uint64, error) {
	m := make(map[int]uint64, len(rlimitTypes))
	for name, res := range rlimitTypes {
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
		res, ok := rlimitTypes[r.Type]
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
