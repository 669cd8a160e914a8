package main

import (
	"fmt"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fscommon"
	"github.com/opencontainers/runc/libcontainer"
)

// oomKills returns how many processes of the container the kernel's OOM
// killer killed for going past the memory limit: the oom_kill count of the
// container's memory cgroup (memory.oom_control on cgroup v1,
// memory.events on v2). Read after the run, before the container and its
// cgroup are destroyed.
func oomKills(c *libcontainer.Container) (uint64, error) {
	st, err := c.State()
	if err != nil {
		return 0, fmt.Errorf("container state: %w", err)
	}
	if cgroups.IsCgroup2UnifiedMode() {
		return fscommon.GetValueByKey(st.CgroupPaths[""], "memory.events", "oom_kill")
	}
	dir := st.CgroupPaths["memory"]
	if dir == "" {
		return 0, fmt.Errorf("the container has no memory cgroup")
	}
	return fscommon.GetValueByKey(dir, "memory.oom_control", "oom_kill")
}
