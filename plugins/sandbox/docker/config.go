package main

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	units "github.com/docker/go-units"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// Labels every container of this backend carries.
const (
	// runLabel is agentnode.run=<RunID>: cleanup proves no container with
	// it is left.
	runLabel = "agentnode.run"
	// ownerLabel names the plugin process that owns the container (see
	// owner.go), so that a later plugin process can tell a live
	// neighbour's container from one orphaned by a crash.
	ownerLabel = "agentnode.owner"
	// namePrefix + RunID is the container's name.
	namePrefix = "agentnode-"
)

// maxRunIDLen bounds RunID; it becomes the container's name and a label.
const maxRunIDLen = 128

// runIDPattern is what Docker accepts in a container name, less the
// separators that could make "agentnode-<RunID>" ambiguous.
var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// imageIDPattern is an image ID (config digest). Only IDs are run: a name or
// tag could point anywhere, and nothing is ever pulled.
var imageIDPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func validateRunID(id string) error {
	if id == "" || len(id) > maxRunIDLen {
		return fmt.Errorf("run id must be 1 to %d characters", maxRunIDLen)
	}
	if !runIDPattern.MatchString(id) {
		return fmt.Errorf("run id %q: only [A-Za-z0-9_.-] allowed, starting with a letter or digit", id)
	}
	return nil
}

func validateImageID(id string) error {
	if !imageIDPattern.MatchString(id) {
		return fmt.Errorf("image id %q: want the image's config digest, sha256:<64 hex digits>", id)
	}
	return nil
}

// containerSpec is everything ContainerCreate gets, and what inspect must
// show the engine stored.
type containerSpec struct {
	name   string
	config *container.Config
	host   *container.HostConfig
}

// containerConfig maps the hardened profile, filled for this run by
// profile.ForRun, onto the Engine API. Anything in the profile Docker cannot
// express the way the profile says is either mapped to Docker's equivalent
// (documented in README.md) or refused.
// imageID is the image to run, the config digest (Run resolves it in the
// host's image store); Docker runs it, not the profile's Root.Path.
func containerConfig(run sandbox.Spec, imageID, owner string) (*containerSpec, error) {
	if err := validateImageID(imageID); err != nil {
		return nil, err
	}
	s, err := profile.ForRun(run)
	if err != nil {
		return nil, err
	}
	p := s.Process
	switch {
	case p == nil || s.Linux == nil || s.Root == nil || s.Linux.Resources == nil:
		return nil, errors.New("profile: incomplete spec")
	case p.User.UID == 0 || p.User.GID == 0:
		return nil, fmt.Errorf("profile: refusing to run as uid %d gid %d", p.User.UID, p.User.GID)
	case len(p.User.AdditionalGids) > 0:
		return nil, errors.New("profile: additional groups are not supported")
	case !p.NoNewPrivileges:
		return nil, errors.New("profile: refusing to run without no_new_privileges")
	case p.Terminal:
		return nil, errors.New("profile: terminals are not supported")
	case !s.Root.Readonly:
		return nil, errors.New("profile: refusing a writable root filesystem")
	case p.Capabilities == nil || len(p.Capabilities.Bounding)+len(p.Capabilities.Effective)+
		len(p.Capabilities.Permitted)+len(p.Capabilities.Inheritable)+len(p.Capabilities.Ambient) > 0:
		return nil, errors.New("profile: the Docker backend drops every capability; the profile must not keep any")
	case s.Linux.Seccomp == nil:
		return nil, errors.New("profile: no seccomp filter")
	case run.Runtime == sandbox.RuntimeGVisor && run.Workspace != nil:
		// The workspace is a volume the engine mounts noexec on the host
		// (workspaceMount); gVisor's kernel gets it as a plain bind and
		// would execute from it.
		return nil, errors.New("a workspace under gVisor cannot be mounted noexec by Docker " +
			"(gVisor does not see the volume's noexec): use the podman backend, or no workspace")
	}
	for _, ns := range s.Linux.Namespaces {
		if ns.Path != "" {
			return nil, fmt.Errorf("profile: joining the %s namespace at %s is not supported", ns.Type, ns.Path)
		}
	}

	res, err := resources(s.Linux.Resources)
	if err != nil {
		return nil, err
	}
	if res.Ulimits, err = ulimits(p.Rlimits); err != nil {
		return nil, err
	}
	tmpfs, shmSize, binds, err := mounts(s.Mounts)
	if err != nil {
		return nil, err
	}

	cfg := &container.Config{
		Hostname: s.Hostname,
		User:     strconv.FormatUint(uint64(p.User.UID), 10) + ":" + strconv.FormatUint(uint64(p.User.GID), 10),
		// stdin, stdout and stderr are attached (no TTY) and stdin is
		// closed when our attach half-closes it.
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    true,
		Tty:          false,
		Env:          slices.Clone(p.Env),
		// Args[0] is the entrypoint, so an ENTRYPOINT or CMD in the image
		// can never wrap or replace the tool.
		Entrypoint: []string{p.Args[0]},
		Cmd:        slices.Clone(p.Args[1:]),
		Image:      imageID,
		WorkingDir: p.Cwd,
		Labels:     map[string]string{runLabel: run.RunID},
		// Docker's default StopSignal is irrelevant: runs end by exit or
		// SIGKILL, never by "docker stop".
	}
	if owner != "" {
		cfg.Labels[ownerLabel] = owner
	}
	no := false
	hc := &container.HostConfig{
		// Tool output goes to the host over the attach stream only; it is
		// never written to the engine's container log.
		LogConfig:      container.LogConfig{Type: "none"},
		NetworkMode:    "none",
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
		AutoRemove:     false, // we remove, then prove it
		CapDrop:        []string{"ALL"},
		CgroupnsMode:   container.CgroupnsModePrivate,
		IpcMode:        container.IPCModePrivate, // no /dev/shm mount on the host
		Privileged:     false,
		ReadonlyRootfs: true,
		SecurityOpt: []string{
			"no-new-privileges",
			"seccomp=" + string(profile.SeccompDockerJSON()),
		},
		Tmpfs:         tmpfs,
		ShmSize:       shmSize,
		Resources:     res,
		Mounts:        binds,
		MaskedPaths:   nonNil(s.Linux.MaskedPaths),
		ReadonlyPaths: nonNil(s.Linux.ReadonlyPaths),
		Init:          &no,
	}
	if run.Runtime == sandbox.RuntimeGVisor {
		hc.Runtime = GVisorRuntime
	}
	return &containerSpec{name: namePrefix + run.RunID, config: cfg, host: hc}, nil
}

// nonNil returns a non-nil copy: a nil MaskedPaths or ReadonlyPaths means
// "the engine's defaults" to Docker, an empty one means none.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}

// resources maps linux.resources: memory and memory+swap, pids, and the CFS
// quota as NanoCPUs (Docker turns it back into quota/period over 100 ms).
func resources(r *specs.LinuxResources) (container.Resources, error) {
	if r.Memory == nil || r.Memory.Limit == nil || r.Memory.Swap == nil || r.Pids == nil || r.Pids.Limit == nil || r.CPU == nil ||
		r.CPU.Quota == nil || r.CPU.Period == nil {
		return container.Resources{}, errors.New("profile: memory, memory+swap, pids and cpu limits are required")
	}
	mem, swap, pids := *r.Memory.Limit, *r.Memory.Swap, *r.Pids.Limit
	quota, period := *r.CPU.Quota, *r.CPU.Period
	switch {
	case mem <= 0 || swap < mem:
		return container.Resources{}, fmt.Errorf("profile: memory limit %d / memory+swap %d", mem, swap)
	case pids <= 0:
		return container.Resources{}, fmt.Errorf("profile: pids limit %d", pids)
	case quota <= 0 || period == 0 || period > math.MaxInt64/1_000_000_000:
		return container.Resources{}, fmt.Errorf("profile: cpu quota %d period %d", quota, period)
	}
	nano := float64(quota) * 1e9 / float64(period)
	if nano > math.MaxInt64 {
		return container.Resources{}, fmt.Errorf("profile: cpu quota %d period %d out of range", quota, period)
	}
	no := false
	return container.Resources{
		Memory:         mem,
		MemorySwap:     swap,
		PidsLimit:      &pids,
		NanoCPUs:       int64(math.Round(nano)),
		OomKillDisable: &no,
	}, nil
}

// ulimits maps process.rlimits (already within this process's hard limits)
// to Docker's names: RLIMIT_NOFILE → nofile.
func ulimits(rl []specs.POSIXRlimit) ([]*container.Ulimit, error) {
	out := make([]*container.Ulimit, 0, len(rl))
	for _, r := range rl {
		name, ok := strings.CutPrefix(r.Type, "RLIMIT_")
		if !ok {
			return nil, fmt.Errorf("profile: rlimit %q", r.Type)
		}
		name = strings.ToLower(name)
		if r.Hard > math.MaxInt64 || r.Soft > r.Hard {
			return nil, fmt.Errorf("profile: rlimit %s %d:%d", r.Type, r.Soft, r.Hard)
		}
		u, err := units.ParseUlimit(fmt.Sprintf("%s=%d:%d", name, r.Soft, r.Hard))
		if err != nil {
			return nil, fmt.Errorf("profile: rlimit %s: Docker cannot set it: %w", r.Type, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// Mount options Docker's tmpfs accepts and the profile uses.
var tmpfsFlags = map[string]bool{"nosuid": true, "nodev": true, "noexec": true, "rw": true, "ro": true, "strictatime": true}

// mounts maps the profile's mounts. Docker manages /proc, /dev, /dev/shm
// (only its size is ours), /dev/mqueue, /sys and /sys/fs/cgroup itself; the
// profile's tmpfs mounts become HostConfig.Tmpfs with the same options and
// the package becomes a non-recursive read-only bind, first in binds; with
// sealed egress the host's socket follows as a non-recursive read-only bind
// at profile.EgressSocketPath (connect(2) works through a read-only mount).
// Anything else is refused rather than silently dropped.
func mounts(ms []specs.Mount) (tmpfs map[string]string, shmSize int64, binds []mount.Mount, err error) {
	tmpfs = map[string]string{}
	havePack := false
	var pack mount.Mount
	var egress, workspace []mount.Mount
	for _, m := range ms {
		switch {
		case engineManaged[m.Destination] && m.Type == engineManagedType[m.Destination]:
			if m.Destination == "/dev/shm" {
				size, ok := option(m.Options, "size=")
				if !ok {
					return nil, 0, nil, errors.New("profile: /dev/shm has no size")
				}
				if shmSize, err = units.RAMInBytes(size); err != nil || shmSize <= 0 {
					return nil, 0, nil, fmt.Errorf("profile: /dev/shm size %q: %w", size, err)
				}
			}
		case m.Type == "tmpfs":
			if _, ok := option(m.Options, "size="); !ok {
				return nil, 0, nil, fmt.Errorf("profile: tmpfs %s has no size", m.Destination)
			}
			for _, o := range m.Options {
				k, _, hasValue := strings.Cut(o, "=")
				if !hasValue && !tmpfsFlags[o] {
					return nil, 0, nil, fmt.Errorf("profile: tmpfs %s: option %q", m.Destination, o)
				}
				if hasValue && k != "size" && k != "mode" && k != "uid" && k != "gid" && k != "nr_inodes" {
					return nil, 0, nil, fmt.Errorf("profile: tmpfs %s: option %q", m.Destination, o)
				}
			}
			tmpfs[m.Destination] = strings.Join(m.Options, ",")
		case m.Destination == profile.PackDir && m.Type == "bind":
			if !slices.Contains(m.Options, "ro") || !filepath.IsAbs(m.Source) {
				return nil, 0, nil, errors.New("profile: the package mount must be a read-only bind of an absolute path")
			}
			pack = mount.Mount{
				Type:     mount.TypeBind,
				Source:   m.Source,
				Target:   profile.PackDir,
				ReadOnly: true,
				BindOptions: &mount.BindOptions{
					// bind, not rbind: mounts below the package
					// directory do not come along.
					NonRecursive: true,
					Propagation:  mount.PropagationRPrivate,
				},
			}
			havePack = true
		case m.Destination == profile.EgressSocketPath && m.Type == "bind" && len(egress) == 0:
			if !slices.Contains(m.Options, "ro") || !filepath.IsAbs(m.Source) {
				return nil, 0, nil, errors.New("profile: the egress socket mount must be a read-only bind of an absolute path")
			}
			egress = append(egress, mount.Mount{
				Type:     mount.TypeBind,
				Source:   m.Source,
				Target:   profile.EgressSocketPath,
				ReadOnly: true,
				BindOptions: &mount.BindOptions{
					NonRecursive: true,
					Propagation:  mount.PropagationRPrivate,
				},
			})
		case m.Type == "bind" && m.Destination == m.Source && len(workspace) == 0:
			ws, err := workspaceMount(m)
			if err != nil {
				return nil, 0, nil, err
			}
			workspace = append(workspace, ws)
		default:
			return nil, 0, nil, fmt.Errorf("profile: mount %s (%s) has no Docker mapping", m.Destination, m.Type)
		}
	}
	if !havePack || shmSize == 0 || len(tmpfs) == 0 {
		return nil, 0, nil, errors.New("profile: the package mount, /dev/shm and the tmpfs mounts are required")
	}
	return tmpfs, shmSize, append(append([]mount.Mount{pack}, egress...), workspace...), nil
}

// workspaceMount maps the workspace's bind mount (sandbox.Spec.Workspace:
// the same path inside, nosuid, nodev, noexec, ro unless writable). A
// Docker bind mount cannot be noexec, nosuid or nodev, so the workspace is
// an anonymous volume of the local driver that binds the directory with
// those options; it goes with the container (removed with RemoveVolumes).
// The driver applies them by remounting the bind read-only, and only then:
// a writable workspace is refused (it would be executable), so on Docker a
// workspace is read-only or not at all.
func workspaceMount(m specs.Mount) (mount.Mount, error) {
	if !filepath.IsAbs(m.Source) || filepath.Clean(m.Source) != m.Source || strings.ContainsAny(m.Source, ",\n") {
		return mount.Mount{}, fmt.Errorf("profile: the workspace %q cannot be passed to Docker (a clean absolute path without ',' or newlines)", m.Source)
	}
	if slices.Equal(m.Options, append(slices.Clone(profile.WorkspaceMountOptions), "rw")) {
		// The local driver applies a bind's flags only by remounting
		// it read-only: a writable bind would not be noexec.
		return mount.Mount{}, errors.New("a writable workspace cannot be mounted noexec by Docker " +
			"(its bind mounts take no noexec, nosuid or nodev): use the libcontainer or podman backend, or a read-only workspace")
	}
	if !slices.Equal(m.Options, append(slices.Clone(profile.WorkspaceMountOptions), "ro")) {
		return mount.Mount{}, fmt.Errorf("profile: workspace mount %s: options %v", m.Destination, m.Options)
	}
	// "ro" is in the driver's options (Docker refuses ReadOnly on an
	// anonymous volume): the driver's bind is read-only itself.
	o := strings.Join(m.Options, ",")
	return mount.Mount{
		Type:   mount.TypeVolume,
		Target: m.Destination,
		VolumeOptions: &mount.VolumeOptions{
			NoCopy: true,
			DriverConfig: &mount.Driver{Name: "local", Options: map[string]string{
				"type": "none", "device": m.Source, "o": o,
			}},
		},
	}, nil
}

// engineManaged are the profile's mounts Docker sets up itself (with the
// same or stricter options: see README.md), by destination and type.
var (
	engineManaged     = map[string]bool{"/proc": true, "/dev": true, "/dev/shm": true, "/dev/mqueue": true, "/sys": true, "/sys/fs/cgroup": true}
	engineManagedType = map[string]string{"/proc": "proc", "/dev": "tmpfs", "/dev/shm": "tmpfs", "/dev/mqueue": "mqueue", "/sys": "sysfs", "/sys/fs/cgroup": "cgroup"}
)

// option returns the value of the option starting with prefix ("size=").
func option(opts []string, prefix string) (string, bool) {
	for _, o := range opts {
		if v, ok := strings.CutPrefix(o, prefix); ok {
			return v, true
		}
	}
	return "", false
}
