package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// Labels every container of this plugin carries.
const (
	runLabel   = "agentnode.run"   // the RunID
	nonceLabel = "agentnode.nonce" // a random value of this run only: finds our container without trusting its name
	ownerLabel = "agentnode.owner" // "<pid>:<start time>" of the plugin process that runs it
	namePrefix = "agentnode-"      // the container name is namePrefix + RunID
)

// runParams are the parts of a podman run command that are not in the
// profile.
type runParams struct {
	runID        string
	nonce        string
	owner        string
	imageID      string // 64 hex digits: the image's config digest
	cidfile      string
	seccompFile  string
	cgroupParent string
	// memoryOnParent: the memory limits are set on cgroupParent (the run's
	// own cgroup, see runcgroup.go), not passed to podman for the
	// container's cgroup.
	memoryOnParent bool
	// backstop, if > 0, is conmon's own --timeout in seconds: the container
	// is killed even if this plugin dies.
	backstop uint64
	// autoRemove: podman removes the container itself when it exits
	// (--rm); otherwise the container is kept for inspection and removal.
	autoRemove bool
}

// hexID matches a full image or container ID.
var hexID = regexp.MustCompile(`^[0-9a-f]{64}$`)

// runIDRE is what a RunID may be: it names the container and a label.
var runIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// parseImageID accepts "sha256:<64 hex>" (or the bare hex) and returns the
// hex, which podman resolves as an image ID only.
func parseImageID(id string) (string, error) {
	h := strings.TrimPrefix(id, "sha256:")
	if !hexID.MatchString(h) {
		return "", fmt.Errorf("ImageID %q is not sha256:<64 lowercase hex digits> (the image's config digest)", id)
	}
	return h, nil
}

// runArgs maps a profile.ForRun spec onto `podman run` arguments (after the
// global options). Everything in the spec is mapped or refused: a profile
// field this function does not know fails the run instead of being
// silently dropped. Where podman's defaults already are the profile (the
// /proc, /dev, /dev/mqueue, /sys and /sys/fs/cgroup mounts, the read-only
// /proc paths, a device cgroup that denies all but the standard devices),
// the tests compare the config podman hands to runc with the profile.
func runArgs(s *specs.Spec, p runParams) ([]string, error) {
	if s == nil || s.Process == nil || s.Root == nil || s.Linux == nil {
		return nil, errors.New("profile: incomplete spec")
	}
	proc, lx := s.Process, s.Linux
	switch {
	case !runIDRE.MatchString(p.runID):
		return nil, fmt.Errorf("run id %q: want 1-128 of [A-Za-z0-9_.-], starting with a letter or digit", p.runID)
	case !hexID.MatchString(p.imageID):
		return nil, fmt.Errorf("image id %q is not 64 hex digits", p.imageID)
	case p.nonce == "" || p.cidfile == "" || p.seccompFile == "" || !strings.HasPrefix(p.cgroupParent, "/"):
		return nil, errors.New("incomplete run parameters")
	case proc.Terminal:
		return nil, errors.New("profile: terminals are not supported")
	case proc.User.UID == 0 || proc.User.GID == 0 || len(proc.User.AdditionalGids) > 0:
		return nil, fmt.Errorf("profile: refusing user %d:%d with groups %v", proc.User.UID, proc.User.GID, proc.User.AdditionalGids)
	case !proc.NoNewPrivileges:
		return nil, errors.New("profile: refusing to run without no_new_privileges")
	case proc.Capabilities == nil || len(proc.Capabilities.Bounding)+len(proc.Capabilities.Effective)+
		len(proc.Capabilities.Inheritable)+len(proc.Capabilities.Permitted)+len(proc.Capabilities.Ambient) > 0:
		return nil, errors.New("profile: every capability set must be empty (mapped to --cap-drop=ALL)")
	case !s.Root.Readonly:
		return nil, errors.New("profile: the root file system must be read-only")
	case lx.Seccomp == nil:
		return nil, errors.New("profile: no seccomp filter")
	case proc.ApparmorProfile != "" || proc.SelinuxLabel != "" || proc.OOMScoreAdj != nil || proc.IOPriority != nil ||
		proc.Scheduler != nil || proc.ExecCPUAffinity != nil || proc.ConsoleSize != nil || proc.CommandLine != "":
		return nil, errors.New("profile: process fields the podman backend cannot map")
	case len(lx.UIDMappings)+len(lx.GIDMappings) > 0 || len(lx.Sysctl) > 0 || len(lx.Devices) > 0 ||
		lx.CgroupsPath != "" || lx.RootfsPropagation != "" || lx.MountLabel != "" || lx.IntelRdt != nil ||
		lx.Personality != nil || len(lx.NetDevices) > 0 || lx.TimeOffsets != nil || s.Hooks != nil:
		return nil, errors.New("profile: linux fields the podman backend cannot map")
	case len(proc.Args) == 0 || proc.Args[0] == "":
		return nil, errors.New("profile: no argv")
	}

	a := []string{
		"run",
		"--rm=" + strconv.FormatBool(p.autoRemove),
		"--name", namePrefix + p.runID,
		"--label", runLabel + "=" + p.runID,
		"--label", nonceLabel + "=" + p.nonce,
		"--cidfile", p.cidfile,
		"--interactive",
		"--log-driver", "passthrough",
		"--pull", "never",
		"--read-only",
		"--read-only-tmpfs=false",
		"--cap-drop=ALL",
		"--security-opt", "no-new-privileges",
		"--security-opt", "seccomp=" + p.seccompFile,
		"--user", fmt.Sprintf("%d:%d", proc.User.UID, proc.User.GID),
		"--passwd=false",
		"--network", "none",
		"--userns", "host",
		"--systemd=false",
		"--image-volume", "ignore",
		"--env-host=false",
		"--http-proxy=false",
		"--no-healthcheck",
		"--no-hosts",
		// The container gets a cgroup under the run's; conmon stays in
		// this plugin's (runcgroup.go).
		"--cgroups", "no-conmon",
		"--cgroup-parent", p.cgroupParent,
		"--workdir", proc.Cwd,
	}
	if p.owner != "" {
		a = append(a, "--label", ownerLabel+"="+p.owner)
	}
	if p.backstop > 0 {
		a = append(a, "--timeout", strconv.FormatUint(p.backstop, 10))
	}
	if s.Hostname != "" {
		a = append(a, "--hostname", s.Hostname)
	}

	ns, err := namespaceArgs(lx.Namespaces)
	if err != nil {
		return nil, err
	}
	a = append(a, ns...)

	if len(lx.MaskedPaths) > 0 {
		for _, m := range lx.MaskedPaths {
			if strings.ContainsAny(m, ":,") || !strings.HasPrefix(m, "/") {
				return nil, fmt.Errorf("profile: masked path %q cannot be passed to podman", m)
			}
		}
		// Added to podman's own masked paths.
		a = append(a, "--security-opt", "mask="+strings.Join(lx.MaskedPaths, ":"))
	}
	// Read-only paths have no podman option; podman's defaults must cover
	// the profile's (TestPodmanConfigMatchesProfile).

	res, err := resourceArgs(lx.Resources, p.memoryOnParent)
	if err != nil {
		return nil, err
	}
	a = append(a, res...)

	for _, r := range proc.Rlimits {
		name, ok := strings.CutPrefix(r.Type, "RLIMIT_")
		if !ok || name == "" {
			return nil, fmt.Errorf("profile: rlimit %q", r.Type)
		}
		a = append(a, "--ulimit", fmt.Sprintf("%s=%d:%d", strings.ToLower(name), r.Soft, r.Hard))
	}

	mnt, err := mountArgs(s.Mounts, proc.User.UID, proc.User.GID)
	if err != nil {
		return nil, err
	}
	a = append(a, mnt...)

	// The image's environment and podman's defaults go; the profile's
	// PATH and HOME and the run's variables come.
	a = append(a, "--unsetenv-all")
	for _, kv := range proc.Env {
		if !strings.Contains(kv, "=") {
			return nil, fmt.Errorf("profile: env %q is not KEY=VALUE", kv)
		}
		a = append(a, "--env", kv)
	}

	// The argv: the image's ENTRYPOINT and CMD never apply. The JSON form
	// of --entrypoint takes argv[0] verbatim; the rest follows the image.
	ep, err := json.Marshal([]string{proc.Args[0]})
	if err != nil {
		return nil, err
	}
	a = append(a, "--entrypoint", string(ep), p.imageID)
	return append(a, proc.Args[1:]...), nil
}

// namespaceArgs maps the profile's namespaces: each must be new. Network
// is always none (loopback only); there is no user namespace.
func namespaceArgs(nss []specs.LinuxNamespace) ([]string, error) {
	flags := map[specs.LinuxNamespaceType]string{
		specs.PIDNamespace:    "--pid",
		specs.IPCNamespace:    "--ipc",
		specs.UTSNamespace:    "--uts",
		specs.CgroupNamespace: "--cgroupns",
	}
	var a []string
	have := map[specs.LinuxNamespaceType]bool{}
	for _, n := range nss {
		if n.Path != "" {
			return nil, fmt.Errorf("profile: namespace %s joins %s", n.Type, n.Path)
		}
		have[n.Type] = true
		switch n.Type {
		case specs.NetworkNamespace, specs.MountNamespace:
			// --network none above; every container has its own mounts.
		default:
			f, ok := flags[n.Type]
			if !ok {
				return nil, fmt.Errorf("profile: namespace %s cannot be mapped to podman", n.Type)
			}
			a = append(a, f, "private")
		}
	}
	for _, t := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.NetworkNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.MountNamespace} {
		if !have[t] {
			return nil, fmt.Errorf("profile: namespace %s is missing", t)
		}
	}
	return a, nil
}

// resourceArgs maps memory (= memory+swap), pids and CFS quota. With
// memoryOnParent the memory limits are checked but left out: the run's
// cgroup carries them.
func resourceArgs(r *specs.LinuxResources, memoryOnParent bool) ([]string, error) {
	if r == nil || r.Memory == nil || r.Memory.Limit == nil || r.Memory.Swap == nil ||
		r.Pids == nil || r.Pids.Limit == nil || *r.Pids.Limit <= 0 || r.CPU == nil || r.CPU.Quota == nil || r.CPU.Period == nil {
		return nil, errors.New("profile: memory, memory+swap, pids and cpu limits are required")
	}
	if *r.Memory.Limit <= 0 || *r.Memory.Swap < *r.Memory.Limit || *r.CPU.Quota <= 0 || *r.CPU.Period == 0 || *r.CPU.Period > math.MaxInt64 {
		return nil, fmt.Errorf("profile: limits out of range (memory %d, memory+swap %d, cpu %d/%d)", *r.Memory.Limit, *r.Memory.Swap, *r.CPU.Quota, *r.CPU.Period)
	}
	if r.Memory.Reservation != nil || r.Memory.Kernel != nil || r.Memory.KernelTCP != nil || r.Memory.Swappiness != nil ||
		r.Memory.DisableOOMKiller != nil || r.CPU.Shares != nil || r.CPU.RealtimeRuntime != nil || r.CPU.RealtimePeriod != nil ||
		r.CPU.Cpus != "" || r.CPU.Mems != "" || r.CPU.Idle != nil || r.BlockIO != nil || len(r.HugepageLimits) > 0 ||
		r.Network != nil || len(r.Rdma) > 0 || len(r.Unified) > 0 {
		return nil, errors.New("profile: resource limits the podman backend cannot map")
	}
	// The device cgroup: the profile denies everything; podman denies
	// everything but the standard devices it creates.
	for _, d := range r.Devices {
		if d.Allow {
			return nil, errors.New("profile: device cgroup allow rules cannot be mapped to podman")
		}
	}
	a := []string{
		"--pids-limit", strconv.FormatInt(*r.Pids.Limit, 10),
		"--cpu-period", strconv.FormatUint(*r.CPU.Period, 10),
		"--cpu-quota", strconv.FormatInt(*r.CPU.Quota, 10),
	}
	if !memoryOnParent {
		a = append(a, "--memory", strconv.FormatInt(*r.Memory.Limit, 10), "--memory-swap", strconv.FormatInt(*r.Memory.Swap, 10))
	}
	return a, nil
}

// podmanDefaultMounts are mounts podman makes itself with the profile's
// options (or stricter): nothing to pass.
var podmanDefaultMounts = map[string]string{
	"/proc":          "proc",
	"/dev":           "tmpfs",
	"/dev/mqueue":    "mqueue",
	"/sys":           "sysfs",
	"/sys/fs/cgroup": "cgroup",
}

// workspaceKey marks the workspace's mount as seen in mountArgs (no
// destination is empty).
const workspaceKey = ""

// mountArgs maps the profile's mounts: the tmpfs mounts (/tmp, HOME) with
// their options, /dev/shm's size, and the package's read-only bind mount.
func mountArgs(mounts []specs.Mount, uid, gid uint32) ([]string, error) {
	var a []string
	seen := map[string]bool{}
	for _, m := range mounts {
		seen[m.Destination] = true
		if typ, ok := podmanDefaultMounts[m.Destination]; ok {
			if m.Type != typ {
				return nil, fmt.Errorf("profile: mount %s of type %s, podman mounts %s", m.Destination, m.Type, typ)
			}
			continue
		}
		switch {
		case m.Destination == "/dev/shm":
			size, ok := option(m.Options, "size=")
			if m.Type != "tmpfs" || !ok {
				return nil, errors.New("profile: /dev/shm must be a size-limited tmpfs")
			}
			for _, o := range []string{"nosuid", "noexec", "nodev"} {
				if !slices.Contains(m.Options, o) {
					return nil, fmt.Errorf("profile: /dev/shm without %s", o)
				}
			}
			// podman's /dev/shm is nosuid,noexec,nodev,mode=1777.
			a = append(a, "--shm-size", size)
		case m.Type == "tmpfs":
			opts, err := tmpfsOptions(m, uid, gid)
			if err != nil {
				return nil, err
			}
			a = append(a, "--tmpfs", m.Destination+":"+opts)
		case m.Type == "bind" && m.Destination == profile.PackDir:
			if !strings.HasPrefix(m.Source, "/") || strings.ContainsAny(m.Source, ":,\n") {
				return nil, fmt.Errorf("PackageDir %q cannot be passed to podman (absolute, without ':' ',' or newlines)", m.Source)
			}
			opts := slices.Clone(m.Options)
			if !slices.Contains(opts, "ro") || !slices.Contains(opts, "bind") || slices.Contains(opts, "rbind") {
				return nil, fmt.Errorf("profile: %s must be a read-only, non-recursive bind mount", profile.PackDir)
			}
			a = append(a, "--volume", m.Source+":"+m.Destination+":"+strings.Join(opts, ","))
		case m.Type == "bind" && m.Destination == profile.EgressSocketPath:
			// Sealed egress: the host's socket, read-only (connect(2)
			// works through it), never recursive.
			if !strings.HasPrefix(m.Source, "/") || strings.ContainsAny(m.Source, ":,\n") {
				return nil, fmt.Errorf("EgressSocket %q cannot be passed to podman (absolute, without ':' ',' or newlines)", m.Source)
			}
			opts := slices.Clone(m.Options)
			if !slices.Contains(opts, "ro") || !slices.Contains(opts, "bind") || slices.Contains(opts, "rbind") {
				return nil, fmt.Errorf("profile: %s must be a read-only, non-recursive bind mount", profile.EgressSocketPath)
			}
			a = append(a, "--volume", m.Source+":"+m.Destination+":"+strings.Join(opts, ","))
		case m.Type == "bind" && m.Destination == m.Source && !seen[workspaceKey]:
			// The workspace (sandbox.Spec.Workspace): the same path
			// inside, nosuid, nodev, noexec, ro unless writable.
			seen[workspaceKey] = true
			if !strings.HasPrefix(m.Source, "/") || strings.ContainsAny(m.Source, ":,\n") {
				return nil, fmt.Errorf("the workspace %q cannot be passed to podman (absolute, without ':' ',' or newlines)", m.Source)
			}
			base := profile.WorkspaceMountOptions
			if !slices.Equal(m.Options, append(slices.Clone(base), "ro")) && !slices.Equal(m.Options, append(slices.Clone(base), "rw")) {
				return nil, fmt.Errorf("profile: workspace mount %s: options %v", m.Destination, m.Options)
			}
			a = append(a, "--volume", m.Source+":"+m.Destination+":"+strings.Join(m.Options, ","))
		default:
			return nil, fmt.Errorf("profile: mount %s (%s) cannot be mapped to podman", m.Destination, m.Type)
		}
	}
	for _, d := range []string{"/proc", "/dev", "/tmp", profile.HomeDir, profile.PackDir} {
		if !seen[d] {
			return nil, fmt.Errorf("profile: mount %s is missing", d)
		}
	}
	return a, nil
}

// tmpfsOptions returns a tmpfs mount's options for --tmpfs. notmpcopyup
// keeps the image's directory contents out, as the profile's plain tmpfs
// does. Podman refuses uid= and gid=: when they name the process's user, U
// (chown to the container's user) does the same. A world-writable tmpfs
// (/tmp's mode=1777) gets U too: runc before 1.2 replaces a tmpfs's mode
// with that of the mount point in the image (0755 in agentnode's image), so
// only its owner could write it; the process's user is the only user in the
// container, so owning it is what 1777 means there.
func tmpfsOptions(m specs.Mount, uid, gid uint32) (string, error) {
	if _, ok := option(m.Options, "size="); !ok {
		return "", fmt.Errorf("profile: tmpfs %s without a size", m.Destination)
	}
	for _, o := range []string{"nosuid", "nodev", "noexec"} {
		if !slices.Contains(m.Options, o) {
			return "", fmt.Errorf("profile: tmpfs %s without %s", m.Destination, o)
		}
	}
	out := []string{"rw"}
	chown := false
	for _, o := range m.Options {
		switch {
		case strings.HasPrefix(o, "uid="):
			if o != "uid="+strconv.FormatUint(uint64(uid), 10) {
				return "", fmt.Errorf("profile: tmpfs %s %s is not the process's user", m.Destination, o)
			}
			chown = true
		case strings.HasPrefix(o, "gid="):
			if o != "gid="+strconv.FormatUint(uint64(gid), 10) {
				return "", fmt.Errorf("profile: tmpfs %s %s is not the process's group", m.Destination, o)
			}
			chown = true
		case strings.ContainsAny(o, ":,"), o == "exec", o == "suid", o == "dev":
			return "", fmt.Errorf("profile: tmpfs %s option %q", m.Destination, o)
		case o == "rw":
		case strings.HasPrefix(o, "mode="):
			mode, err := strconv.ParseUint(strings.TrimPrefix(o, "mode="), 8, 32)
			if err != nil || mode > 0o7777 {
				return "", fmt.Errorf("profile: tmpfs %s option %q", m.Destination, o)
			}
			if mode&0o002 != 0 {
				chown = true
			}
			out = append(out, o)
		default:
			out = append(out, o)
		}
	}
	out = append(out, "notmpcopyup")
	if chown {
		out = append(out, "U")
	}
	return strings.Join(out, ","), nil
}

// option returns the value of the first option with prefix ("size=").
func option(opts []string, prefix string) (string, bool) {
	for _, o := range opts {
		if v, ok := strings.CutPrefix(o, prefix); ok && v != "" {
			return v, true
		}
	}
	return "", false
}
