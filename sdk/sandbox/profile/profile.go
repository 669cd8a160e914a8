// Package profile is the hardened sandbox profile every sandbox backend
// honours, as Go values: specs/sandbox/profile.json (an OCI runtime-spec
// document) with the seccomp profile of specs/seccomp/agentnode.json filled
// in, and the same profile filled for one run.
//
// Base returns the profile itself; ForRun fills it for a sandbox.Spec (root
// filesystem, argv, environment, the package mount and the resource limits)
// and validates the inputs. libcontainer backends hand ForRun's result to
// runc's specconv; Docker and Podman backends map it onto their own
// options and pass SeccompDockerJSON to the engine. Every call returns a
// fresh deep copy: callers may modify what they get. All functions are safe
// for concurrent use.
//
// Field-by-field reasons are in specs/sandbox/README.md and
// specs/seccomp/README.md.
package profile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/imagestore"
	agentspecs "github.com/agentnode/agentnode/specs"
)

const (
	// HomeDir is the sandbox user's HOME: a 16 MiB tmpfs owned by uid 1000.
	HomeDir = "/sandbox-home"
	// PackDir is where the package directory is mounted, read-only.
	PackDir = "/pack"
)

// Sealed egress (Spec.EgressSocket). The values are also profile.json's
// org.agentnode.egress.* annotations; Base refuses a profile whose
// annotations say otherwise.
const (
	// EgressSocketPath is where the host's egress socket is mounted: the
	// profile's optional mount, present only when Spec.EgressSocket is set.
	// Images must contain it as an empty regular file (the mount point; the
	// root file system is read-only).
	EgressSocketPath = "/run/agentnode/egress.sock"
	// EgressForwarderPath is the image's egress forwarder (built from
	// sdk/sandbox/forwarder): with egress it is the container's pid 1 and
	// runs Spec.Args as its child.
	EgressForwarderPath = "/usr/libexec/agentnode/egress-forwarder"
	// EgressListenAddr is where the forwarder listens inside the container.
	EgressListenAddr = "127.0.0.1:3128"
	// EgressProxyURL is the value of HTTPS_PROXY and friends with egress.
	EgressProxyURL = "http://" + EgressListenAddr
)

// egressAnnotations are profile.json's annotations for the constants above.
var egressAnnotations = map[string]string{
	"org.agentnode.egress.socket":    EgressSocketPath,
	"org.agentnode.egress.forwarder": EgressForwarderPath,
	"org.agentnode.egress.listen":    EgressListenAddr,
}

// EgressEnv is what ForRun adds to the environment with egress: the proxy
// variables curl, Go, Python (requests, httpx, urllib), Node (undici and
// global-agent) and most other clients read, and empty NO_PROXY so that no
// host is exempt. A run may not set any of them itself.
var EgressEnv = []string{
	"HTTPS_PROXY=" + EgressProxyURL,
	"https_proxy=" + EgressProxyURL,
	"HTTP_PROXY=" + EgressProxyURL,
	"http_proxy=" + EgressProxyURL,
	"ALL_PROXY=" + EgressProxyURL,
	"all_proxy=" + EgressProxyURL,
	"NO_PROXY=",
	"no_proxy=",
}

// egressUID is the sandbox user, which must be able to connect to the
// egress socket.
const egressUID, egressGID = 1000, 1000

// Paths and defaults the code relies on; the values live in profile.json.
const (
	profileFile = "sandbox/profile.json"
	tmpDir      = "/tmp"
	// cpuPeriod is the CFS period ForRun uses, in microseconds (100 ms, as
	// Docker's --cpus does).
	cpuPeriod = 100000
	// minCPUQuota is the smallest CFS quota the kernel accepts (1 ms).
	minCPUQuota = 1000
	// maxCPUQuota is the largest CFS quota the kernel accepts (2^44-1 µs).
	maxCPUQuota = 1<<44 - 1
	// minMemoryBytes is the smallest memory limit ForRun accepts: Docker's
	// minimum (6 MiB); less cannot even start the container's init.
	minMemoryBytes = 6 << 20
)

// profileJSON is the embedded profile, read once.
var profileJSON = mustRead(agentspecs.Sandbox, profileFile)

func mustRead(fsys fs.FS, name string) []byte {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		panic(fmt.Sprintf("profile: embedded specs/%s: %v", name, err))
	}
	return b
}

// Base returns a fresh deep copy of the hardened profile with its seccomp
// profile filled in. It is not runnable as is: the root path, the argv and
// the sources of the /pack mount and of the optional egress socket mount
// (EgressSocketPath) are empty until ForRun fills them (or, without
// egress, removes the latter).
func Base() (*specs.Spec, error) {
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("profile: the sandbox profile supports x86_64 only, not %s", runtime.GOARCH)
	}
	dec := json.NewDecoder(bytes.NewReader(profileJSON))
	dec.DisallowUnknownFields()
	var s specs.Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("profile: specs/%s: %w", profileFile, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("profile: specs/%s: data after the profile", profileFile)
	}
	if s.Process == nil || s.Root == nil || s.Linux == nil {
		return nil, fmt.Errorf("profile: specs/%s: process, root and linux are required", profileFile)
	}
	if s.Linux.Seccomp != nil {
		return nil, fmt.Errorf("profile: specs/%s: linux.seccomp must not be inlined (it comes from specs/%s)", profileFile, seccompFile)
	}
	for k, v := range egressAnnotations {
		if s.Annotations[k] != v {
			return nil, fmt.Errorf("profile: specs/%s: annotation %s is %q, the code expects %q", profileFile, k, s.Annotations[k], v)
		}
	}
	sc, err := Seccomp()
	if err != nil {
		return nil, err
	}
	s.Linux.Seccomp = sc
	if err := checkHardened(&s); err != nil {
		return nil, fmt.Errorf("profile: specs/%s: %w", profileFile, err)
	}
	return &s, nil
}

// ForRun returns Base filled in for one run:
//
//   - Root.Path = the unpacked rootfs of run.Image in run.ImageStore
//     (imagestore.RootfsDir): both required, Image pinned, ImageStore
//     absolute. Docker and Podman run an image of their engine, not a
//     directory, and ignore it;
//   - Process.Args = run.Args: required, Args[0] not empty;
//   - Process.Env = the profile's PATH and HOME, then run.Env: KEY=VALUE
//     entries with unique keys that may not set PATH or HOME;
//   - the /pack bind mount's source = run.PackageDir: required and absolute;
//     it may not be the host's root directory;
//   - limits: /tmp's size from Limits.TmpBytes, the memory limit and the
//     memory+swap limit (the same value: no swap) from Limits.MemoryBytes,
//     the pids limit from Limits.Pids, the CFS quota from Limits.CPUs over a
//     100 ms period. A zero field keeps the profile's default; a negative
//     one is an error (there is no "unlimited");
//   - rlimits are lowered to this process's hard limits where the profile's
//     exceed them (never raised);
//   - workspace: with run.Workspace (its path's form checked here; the
//     backend checks the directory itself with CheckWorkspace) a bind mount of
//     Workspace.Path at the same path, with WorkspaceMountOptions, is
//     added after the profile's mounts, and Process.Cwd is that path;
//   - egress: without run.EgressSocket the profile's egress socket mount is
//     removed and nothing else changes. With it (an absolute path to a unix
//     socket, not a symlink, connectable by uid 1000) the mount's source
//     is run.EgressSocket, Process.Args becomes [EgressForwarderPath
//     -listen EgressListenAddr -socket EgressSocketPath -- run.Args...]
//     and EgressEnv is added to the environment (the run may not set those
//     variables).
//
// run.Network, RunID and Timeout are the backend's business: the
// profile always has its own network namespace with only loopback. Errors
// name the sandbox.Spec field at fault.
func ForRun(run sandbox.Spec) (*specs.Spec, error) {
	s, err := Base()
	if err != nil {
		return nil, err
	}

	if !filepath.IsAbs(run.ImageStore) {
		return nil, fmt.Errorf("profile: ImageStore: must be an absolute path, got %q", run.ImageStore)
	}
	if s.Root.Path, err = imagestore.RootfsDir(run.ImageStore, run.Image); err != nil {
		return nil, fmt.Errorf("profile: Image: %w", err)
	}

	if len(run.Args) == 0 {
		return nil, errors.New("profile: Args: required (the argv to run)")
	}
	if run.Args[0] == "" {
		return nil, errors.New("profile: Args[0]: must not be empty")
	}
	for i, a := range run.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, fmt.Errorf("profile: Args[%d]: contains a NUL byte", i)
		}
	}
	s.Process.Args = slices.Clone(run.Args)

	if run.EgressSocket == "" {
		s.Mounts = slices.DeleteFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == EgressSocketPath })
	} else {
		if err := applyEgress(s, run.EgressSocket); err != nil {
			return nil, err
		}
	}

	if s.Process.Env, err = mergeEnv(s.Process.Env, run.Env); err != nil {
		return nil, err
	}

	if run.PackageDir == "" {
		return nil, errors.New("profile: PackageDir: required (the package directory mounted at " + PackDir + ")")
	}
	if !filepath.IsAbs(run.PackageDir) {
		return nil, fmt.Errorf("profile: PackageDir: must be an absolute path, got %q", run.PackageDir)
	}
	pack, err := mountAt(s, PackDir)
	if err != nil {
		return nil, err
	}
	if pack.Source = filepath.Clean(run.PackageDir); pack.Source == "/" {
		return nil, errors.New("profile: PackageDir: the host's root directory is not a package")
	}

	if run.Workspace != nil {
		if err := applyWorkspace(s, *run.Workspace); err != nil {
			return nil, err
		}
	}

	if err := applyLimits(s, run.Limits); err != nil {
		return nil, err
	}
	if err := clampRlimits(s.Process.Rlimits); err != nil {
		return nil, err
	}
	if err := checkHardened(s); err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	return s, nil
}

// applyEgress fills the egress socket mount, wraps the argv in the
// forwarder and adds the proxy environment.
func applyEgress(s *specs.Spec, sock string) error {
	if err := CheckEgressSocket(sock); err != nil {
		return err
	}
	m, err := mountAt(s, EgressSocketPath)
	if err != nil {
		return err
	}
	m.Source = filepath.Clean(sock)
	s.Process.Args = append([]string{EgressForwarderPath, "-listen", EgressListenAddr, "-socket", EgressSocketPath, "--"}, s.Process.Args...)
	s.Process.Env = append(s.Process.Env, EgressEnv...)
	return nil
}

// WorkspaceMountOptions are the options of the workspace's bind mount
// (Spec.Workspace): not recursive (mounts below the directory stay
// outside), no setuid, no devices, nothing executable; "ro" or "rw" is
// added.
var WorkspaceMountOptions = []string{"bind", "nosuid", "nodev", "noexec"}

// CheckWorkspace is the backend's check of a Spec.Workspace on the host,
// right before it mounts the path (ForRun checks only the path's form):
// the path is what ForRun accepts and is, still, a directory reached
// through no symlink (it resolves to itself). The host resolved it when
// the run was decided; a component swapped for a symlink since (to the
// agentnode home, say) is refused here instead of being mounted. Errors
// name the field.
func CheckWorkspace(w sandbox.Workspace) error {
	if err := checkWorkspacePath(w.Path); err != nil {
		return err
	}
	if err := checkWorkspaceSockets(w.Path); err != nil {
		return err
	}
	resolved, err := filepath.EvalSymlinks(w.Path)
	if err != nil {
		return fmt.Errorf("profile: Workspace.Path: %w", err)
	}
	if resolved != w.Path {
		return fmt.Errorf("profile: Workspace.Path: %s now resolves to %s (a symlink on the way): not mounted", w.Path, resolved)
	}
	fi, err := os.Lstat(w.Path)
	if err != nil {
		return fmt.Errorf("profile: Workspace.Path: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("profile: Workspace.Path: %s is not a directory", w.Path)
	}
	return nil
}

// checkWorkspaceSockets refuses a workspace that holds a well-known
// container engine socket: a bind mount, read-only or not, does not stop
// connect(2) on a socket in it.
func checkWorkspaceSockets(p string) error {
	for _, sock := range engineSockets {
		if within(sock, p) {
			return fmt.Errorf("profile: Workspace.Path: %s contains the container engine socket %s: never mounted into a sandbox", p, sock)
		}
	}
	return nil
}

func checkWorkspacePath(p string) error {
	switch {
	case !filepath.IsAbs(p):
		return fmt.Errorf("profile: Workspace.Path: must be an absolute path, got %q", p)
	case strings.IndexByte(p, 0) >= 0:
		return errors.New("profile: Workspace.Path: contains a NUL byte")
	case filepath.Clean(p) != p:
		return fmt.Errorf("profile: Workspace.Path: %q is not clean", p)
	case p == "/":
		return errors.New("profile: Workspace.Path: the host's root directory is never a workspace")
	}
	return nil
}

// checkWorkspaceMounts refuses a workspace path that overlaps one of the
// profile's mounts or the egress socket's.
func checkWorkspaceMounts(p string, mounts []specs.Mount) error {
	dests := []string{EgressSocketPath}
	for _, m := range mounts {
		dests = append(dests, m.Destination)
	}
	for _, d := range dests {
		if d == tmpDir && within(p, d) && p != d {
			continue
		}
		if within(p, d) || within(d, p) {
			return fmt.Errorf("profile: Workspace.Path: %s overlaps the sandbox's own mount %s", p, d)
		}
	}
	return nil
}

// within reports whether p is dir or below it (both clean and absolute).
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// applyWorkspace adds the workspace's bind mount and makes it the
// working directory.
func applyWorkspace(s *specs.Spec, w sandbox.Workspace) error {
	if err := checkWorkspacePath(w.Path); err != nil {
		return err
	}
	if err := checkWorkspaceMounts(w.Path, s.Mounts); err != nil {
		return err
	}
	if err := checkWorkspaceSockets(w.Path); err != nil {
		return err
	}
	mode := "ro"
	if w.Writable {
		mode = "rw"
	}
	s.Mounts = append(s.Mounts, specs.Mount{
		Destination: w.Path, Type: "bind", Source: w.Path,
		Options: append(slices.Clone(WorkspaceMountOptions), mode),
	})
	s.Process.Cwd = w.Path
	return nil
}

// engineSockets are where container engines listen: an egress socket that
// is one of them would hand the sandbox the engine (root on the host).
// Backends that know their engine's socket check it too.
var engineSockets = []string{
	"/var/run/docker.sock", "/run/docker.sock",
	"/run/podman/podman.sock", "/var/run/podman/podman.sock",
	"/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock",
	"/run/crio/crio.sock", "/var/run/crio/crio.sock",
	"/run/buildkit/buildkitd.sock",
}

// CheckEgressSocket checks a Spec.EgressSocket: an absolute path (no NUL,
// not "/") to a unix socket that is not a symlink and that the sandbox user
// (uid/gid 1000, without capabilities) may connect to, which needs write
// permission on the socket file (its directories do not matter: the socket
// itself is mounted), and that is not a well-known container engine socket.
// Errors name the field.
func CheckEgressSocket(sock string) error {
	switch {
	case !filepath.IsAbs(sock):
		return fmt.Errorf("profile: EgressSocket: must be an absolute path, got %q", sock)
	case strings.IndexByte(sock, 0) >= 0:
		return errors.New("profile: EgressSocket: contains a NUL byte")
	case filepath.Clean(sock) == "/":
		return errors.New("profile: EgressSocket: the host's root directory is not a socket")
	}
	var st unix.Stat_t
	if err := unix.Lstat(sock, &st); err != nil {
		return fmt.Errorf("profile: EgressSocket: %s: %w", sock, err)
	}
	for _, engine := range engineSockets {
		var e unix.Stat_t
		if unix.Stat(engine, &e) == nil && e.Dev == st.Dev && e.Ino == st.Ino {
			return fmt.Errorf("profile: EgressSocket: %s is the container engine's socket %s: never mounted into a sandbox", sock, engine)
		}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Errorf("profile: EgressSocket: %s is not a unix socket (mode %#o)", sock, st.Mode)
	}
	// The permission class that applies, as the kernel picks it.
	var writable bool
	switch {
	case st.Uid == egressUID:
		writable = st.Mode&0o200 != 0
	case st.Gid == egressGID:
		writable = st.Mode&0o020 != 0
	default:
		writable = st.Mode&0o002 != 0
	}
	if !writable {
		return fmt.Errorf("profile: EgressSocket: %s (owner %d:%d, mode %#o) cannot be connected to by the sandbox user %d:%d; it needs write permission",
			sock, st.Uid, st.Gid, st.Mode&0o777, egressUID, egressGID)
	}
	return nil
}

// mergeEnv returns the profile's environment followed by the run's. The
// run may not set PATH or HOME (the profile owns them: HOME must be the
// tmpfs, PATH the image's directories) and may not set a key twice.
func mergeEnv(base, run []string) ([]string, error) {
	owned := map[string]bool{}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		owned[k] = true
	}
	seen := map[string]bool{}
	out := slices.Clone(base)
	for i, kv := range run {
		k, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok || k == "":
			return nil, fmt.Errorf("profile: Env[%d]: not KEY=VALUE", i)
		case strings.IndexByte(kv, 0) >= 0:
			return nil, fmt.Errorf("profile: Env[%d]: contains a NUL byte", i)
		case owned[k]:
			return nil, fmt.Errorf("profile: Env[%d]: %s is set by the profile and may not be overridden", i, k)
		case seen[k]:
			return nil, fmt.Errorf("profile: Env[%d]: %s is set twice", i, k)
		}
		seen[k] = true
		out = append(out, kv)
	}
	return out, nil
}

// CheckLimits reports whether ForRun accepts l: no negative value, a memory
// limit of at least 6 MiB, a CPU count the kernel's CFS quota can express.
// Zero keeps the profile's default. The host checks the configured limits
// with it before deciding a run, so a bad limit is a configuration error,
// not a run that fails in the backend.
func CheckLimits(l sandbox.Limits) error {
	switch {
	case l.MemoryBytes < 0:
		return fmt.Errorf("profile: Limits.MemoryBytes: %d is negative", l.MemoryBytes)
	case l.MemoryBytes > 0 && l.MemoryBytes < minMemoryBytes:
		return fmt.Errorf("profile: Limits.MemoryBytes: %d is below the minimum %d (6 MiB)", l.MemoryBytes, minMemoryBytes)
	case l.Pids < 0:
		return fmt.Errorf("profile: Limits.Pids: %d is negative (unlimited is not allowed)", l.Pids)
	case math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0):
		return fmt.Errorf("profile: Limits.CPUs: %v is not a number of CPUs", l.CPUs)
	case l.CPUs < 0:
		return fmt.Errorf("profile: Limits.CPUs: %v is negative", l.CPUs)
	case l.TmpBytes < 0:
		return fmt.Errorf("profile: Limits.TmpBytes: %d is negative", l.TmpBytes)
	}
	if l.CPUs > 0 {
		if q := math.Round(l.CPUs * cpuPeriod); q < minCPUQuota || q > maxCPUQuota {
			return fmt.Errorf("profile: Limits.CPUs: %v is out of range (%v to %v)", l.CPUs,
				float64(minCPUQuota)/cpuPeriod, float64(maxCPUQuota)/cpuPeriod)
		}
	}
	return nil
}

// applyLimits writes the run's non-zero limits over the profile defaults.
func applyLimits(s *specs.Spec, l sandbox.Limits) error {
	r := s.Linux.Resources
	if r == nil || r.Memory == nil || r.Pids == nil || r.CPU == nil {
		return errors.New("profile: linux.resources: memory, pids and cpu are required")
	}
	if err := CheckLimits(l); err != nil {
		return err
	}
	if l.MemoryBytes > 0 {
		r.Memory.Limit = ptr(l.MemoryBytes)
		r.Memory.Swap = ptr(l.MemoryBytes) // memory+swap = memory: no swap
	}
	if l.Pids > 0 {
		r.Pids.Limit = ptr(l.Pids)
	}
	if l.CPUs > 0 {
		r.CPU.Quota = ptr(int64(math.Round(l.CPUs * cpuPeriod)))
		r.CPU.Period = ptr(uint64(cpuPeriod))
	}
	if l.TmpBytes > 0 {
		m, err := mountAt(s, tmpDir)
		if err != nil {
			return err
		}
		if !setOption(m, "size=", strconv.FormatInt(l.TmpBytes, 10)) {
			return errors.New("profile: mount " + tmpDir + ": no size option to replace")
		}
	}
	return nil
}

// mountAt returns the profile's mount at dest.
func mountAt(s *specs.Spec, dest string) (*specs.Mount, error) {
	for i := range s.Mounts {
		if s.Mounts[i].Destination == dest {
			return &s.Mounts[i], nil
		}
	}
	return nil, fmt.Errorf("profile: no mount at %s", dest)
}

// setOption replaces the value of the option that starts with prefix
// ("size=") and reports whether there was one.
func setOption(m *specs.Mount, prefix, value string) bool {
	for i, o := range m.Options {
		if strings.HasPrefix(o, prefix) {
			m.Options[i] = prefix + value
			return true
		}
	}
	return false
}

// rlimitResources maps the rlimit names the profile may use to resources.
var rlimitResources = map[string]int{
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

// RlimitResource returns the resource number (unix.RLIMIT_*) of an OCI
// rlimit name such as "RLIMIT_NOFILE"; ok is false for names the profile
// does not know.
func RlimitResource(name string) (resource int, ok bool) {
	resource, ok = rlimitResources[name]
	return resource, ok
}

// clampRlimits lowers every rlimit to this process's hard limit where it is
// above it: a runtime that tries to set more fails (and Docker's and
// Podman's --ulimit refuse it), and the sandbox must never get more than
// the host allows.
func clampRlimits(rl []specs.POSIXRlimit) error {
	for i := range rl {
		res, ok := rlimitResources[rl[i].Type]
		if !ok {
			return fmt.Errorf("profile: rlimit %q: unknown type", rl[i].Type)
		}
		var host unix.Rlimit
		if err := unix.Getrlimit(res, &host); err != nil {
			return fmt.Errorf("profile: getrlimit %s: %w", rl[i].Type, err)
		}
		rl[i].Hard = min(rl[i].Hard, host.Max)
		rl[i].Soft = min(rl[i].Soft, rl[i].Hard)
	}
	return nil
}

// requiredNamespaces are the namespaces every sandbox gets, new (no path).
var requiredNamespaces = []specs.LinuxNamespaceType{
	specs.PIDNamespace, specs.NetworkNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.MountNamespace,
}

// checkHardened refuses a spec that lost one of the profile's promises, so
// that a bad edit of profile.json (or of this package) fails closed instead
// of producing a weaker sandbox. The tests assert much more.
func checkHardened(s *specs.Spec) error {
	p := s.Process
	switch {
	case p.User.UID == 0 || p.User.GID == 0:
		return fmt.Errorf("process.user: uid %d gid %d: never 0", p.User.UID, p.User.GID)
	case len(p.User.AdditionalGids) > 0:
		return errors.New("process.user.additionalGids: must be empty")
	case !p.NoNewPrivileges:
		return errors.New("process.noNewPrivileges: must be true")
	case p.Capabilities == nil:
		return errors.New("process.capabilities: must be present with every set empty (absent keeps the runtime's defaults)")
	case len(p.Capabilities.Bounding)+len(p.Capabilities.Effective)+len(p.Capabilities.Inheritable)+
		len(p.Capabilities.Permitted)+len(p.Capabilities.Ambient) > 0:
		return errors.New("process.capabilities: every set must be empty")
	case p.Terminal:
		return errors.New("process.terminal: must be false")
	case !s.Root.Readonly:
		return errors.New("root.readonly: must be true")
	case s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction == specs.ActAllow || s.Linux.Seccomp.DefaultAction == specs.ActLog:
		return errors.New("linux.seccomp: an allowlist profile is required")
	}
	for _, t := range requiredNamespaces {
		if !slices.ContainsFunc(s.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == t }) {
			return fmt.Errorf("linux.namespaces: %s is missing", t)
		}
	}
	for _, n := range s.Linux.Namespaces {
		if n.Path != "" {
			return fmt.Errorf("linux.namespaces: %s joins %s: every namespace must be new", n.Type, n.Path)
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
