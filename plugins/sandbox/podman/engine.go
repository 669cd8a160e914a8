package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/sdk/atomicfile"
	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// searchPath is the whole environment of every podman process besides
// CONTAINERS_CONF: the plugin gets no host environment and passes none on.
// Its directories are also where the podman and runc binaries are looked
// for.
const searchPath = "/usr/sbin:/usr/bin:/sbin:/bin"

// Minimum versions. Podman 4.0 brought the passthrough log driver; runc 1.0
// the seccomp defaultErrnoRet the profile uses. Only podman 4.3 with runc
// 1.1 is tested.
var (
	minPodman = semver{4, 0}
	minRunc   = semver{1, 0}
)

// Defaults for where this plugin keeps its files and containers.
const (
	// DefaultStateDir holds the seccomp profile, the containers.conf and
	// the per-run cidfiles; root only.
	DefaultStateDir = "/run/agentnode/podman"
	// DefaultCgroupParent is the cgroup (in every hierarchy) under which
	// podman's cgroupfs manager creates <parent>/libpod-<container id>.
	DefaultCgroupParent = "/agentnode-podman"
)

// Time limits of podman calls other than the run itself.
const (
	probeTimeout = 30 * time.Second
	callTimeout  = 30 * time.Second
	maxCLIOutput = 4 << 20 // ps and inspect output kept
	maxErrOutput = 4 << 10 // stderr kept for error messages
)

// engine is what the probe found out once: the binaries, podman's storage
// directories and the files every run uses. It is immutable (but for the
// state reader's latch on a damaged database).
type engine struct {
	podman, runc string
	podmanVer    string
	runcVer      string
	// runsc is gVisor's runtime, registered in containers.conf as
	// "runsc" ("" when not installed); gvisor: this engine's calls run
	// containers under it (forRuntime).
	runsc       string
	gvisor      bool
	cgroupV2    bool
	memMount    string // where the memory controller's hierarchy is mounted (v2: the unified one)
	graphRoot   string
	runRoot     string
	graphDriver string
	stateDir    string
	seccompFile string
	confFile    string
	env         []string
	// state reads podman's own state to prove a run's removal without
	// another podman call; nil when it cannot be read here, and then runs
	// keep their container (--rm=false) and ask podman (see state.go).
	state *podmanState
}

// errUnavailable carries an availability reason through the probe.
type errUnavailable struct {
	reason, detail string
}

func (e *errUnavailable) Error() string { return e.reason + ": " + e.detail }

func unavailable(reason, format string, args ...any) error {
	return &errUnavailable{reason: reason, detail: fmt.Sprintf(format, args...)}
}

// findBinary returns the absolute path of an executable regular file name in
// one of dirs, or "".
func findBinary(dirs []string, name string) string {
	for _, d := range dirs {
		p := filepath.Join(d, name)
		fi, err := os.Stat(p)
		if err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// command returns an exec.Cmd of podman with the global options every call
// uses, the explicit environment, its own process group and death with this
// process. Its standard streams are /dev/null until the caller sets them.
func (e *engine) command(args ...string) *exec.Cmd {
	return e.plainCommand(e.podman, append(e.globalArgs(), args...)...)
}

// plainCommand is command for any binary, without podman's global options.
func (e *engine) plainCommand(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = e.env
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Should a process podman starts keep a captured stdout or stderr
	// open, Wait returns this long after podman exited anyway.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// globalArgs are podman's options before the subcommand: the runtime by
// absolute path, the cgroupfs manager (crun and the systemd manager do not
// work on every host; runc with cgroupfs does, as root), no event log, and
// only errors on stderr (which a run shares with the tool).
func (e *engine) globalArgs() []string {
	if e.gvisor {
		// By its containers.conf name, which the container records, so
		// that any later podman call finds runsc again (orphan removal
		// too). --network=none: runsc's own network stack stays off (only
		// loopback), as podman's --network none asks; without it runsc
		// refuses the container.
		return []string{
			"--runtime", "runsc", "--runtime-flag", "network=none", "--runtime-flag", "oci-seccomp", "--runtime-flag", "host-uds=open",
			"--cgroup-manager", "cgroupfs", "--events-backend", "none", "--log-level", "error",
		}
	}
	return []string{
		"--runtime", e.runc,
		"--cgroup-manager", "cgroupfs",
		"--events-backend", "none",
		"--log-level", "error",
	}
}

// call runs podman with args and returns its stdout. ctx bounds it; the
// error carries podman's exit status and the tail of its stderr.
func (e *engine) call(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cmd := e.command(args...)
	// These calls live for milliseconds: podman's garbage collector only
	// costs start-up time there (not so for `podman run`, which lives as
	// long as the tool).
	cmd.Env = append(cmd.Env[:len(cmd.Env):len(cmd.Env)], "GOGC=off")
	return runCmd(ctx, cmd)
}

// cliError is a podman (or runc) call that failed.
type cliError struct {
	args   []string
	code   int // exit status; -1 when it did not exit normally
	stderr string
	err    error
}

func (e *cliError) Error() string {
	msg := fmt.Sprintf("%s: %v", strings.Join(e.args, " "), e.err)
	if e.stderr != "" {
		msg += ": " + e.stderr
	}
	return msg
}

func (e *cliError) Unwrap() error { return e.err }

// runCmd runs cmd to completion under ctx with bounded output buffers.
func runCmd(ctx context.Context, cmd *exec.Cmd) ([]byte, error) {
	var stdout, stderr boundedBuffer
	stdout.max, stderr.max = maxCLIOutput, maxErrOutput
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return nil, &cliError{args: shortArgs(cmd.Args), code: -1, err: err}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		err = fmt.Errorf("killed: %w", context.Cause(ctx))
	}
	if err != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Exited() {
			code = ee.ExitCode()
		}
		return stdout.Bytes(), &cliError{args: shortArgs(cmd.Args), code: code, stderr: strings.TrimSpace(stderr.String()), err: err}
	}
	return stdout.Bytes(), nil
}

// shortArgs drops the global options from a podman argv for messages.
func shortArgs(args []string) []string {
	for i, a := range args {
		if a == "--log-level" && i+2 <= len(args) {
			return append([]string{filepath.Base(args[0])}, args[i+2:]...)
		}
	}
	return args
}

// boundedBuffer keeps the first max bytes written to it.
type boundedBuffer struct {
	bytes.Buffer
	max int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// --- the probe ---

// probe checks that podman can enforce the profile here and prepares the
// files runs use. It runs podman three times (version, runc version, info)
// and is cached by the backend once it succeeds.
func (b *backend) probe(ctx context.Context) (*engine, error) {
	e := &engine{}
	if e.podman = findBinary(b.searchDirs, "podman"); e.podman == "" {
		return nil, unavailable(sandbox.ReasonNotInstalled, "podman not found in %s", strings.Join(b.searchDirs, ":"))
	}
	if euid := b.geteuid(); euid != 0 {
		return nil, unavailable(sandbox.ReasonNotPermitted,
			"the podman backend needs root (running as uid %d): rootless podman on cgroup v1 ignores the memory and pids limits, and running unlimited is refused", euid)
	}
	if e.runc = findBinary(b.searchDirs, "runc"); e.runc == "" {
		return nil, unavailable(sandbox.ReasonNotInstalled, "runc not found in %s (podman runs the sandbox with runc)", strings.Join(b.searchDirs, ":"))
	}
	if detail := seccompProblem(); detail != "" {
		return nil, unavailable(sandbox.ReasonIncompatible, "%s", detail)
	}
	v2, detail := cgroupProblem()
	if detail != "" {
		return nil, unavailable(sandbox.ReasonIncompatible, "%s", detail)
	}
	e.cgroupV2 = v2
	mm, err := memoryMount(v2)
	if err != nil {
		return nil, unavailable(sandbox.ReasonIncompatible, "%v", err)
	}
	e.memMount = mm
	if err := b.writeFiles(e); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	out, err := runCmd(ctx, e.plainCommand(e.podman, "--version"))
	if err != nil {
		return nil, unavailable(sandbox.ReasonIncompatible, "podman --version: %v", err)
	}
	pv, err := parseVersion(out, "podman version ")
	if err != nil || pv.less(minPodman) {
		return nil, unavailable(sandbox.ReasonIncompatible, "podman %q is not usable (need >= %s): %v", strings.TrimSpace(string(out)), minPodman, err)
	}
	e.podmanVer = pv.String()
	if out, err = runCmd(ctx, e.plainCommand(e.runc, "--version")); err != nil {
		return nil, unavailable(sandbox.ReasonIncompatible, "runc --version: %v", err)
	}
	rv, err := parseVersion(out, "runc version ")
	if err != nil || rv.less(minRunc) {
		return nil, unavailable(sandbox.ReasonIncompatible, "runc %q is not usable (need >= %s): %v", firstLine(out), minRunc, err)
	}
	e.runcVer = rv.String()
	if !bytes.Contains(out, []byte("libseccomp:")) {
		return nil, unavailable(sandbox.ReasonIncompatible, "runc %s is built without seccomp support", rv)
	}

	out, err = e.call(ctx, "info", "--format", "json")
	if err != nil {
		return nil, unavailable(sandbox.ReasonIncompatible, "podman info: %v", err)
	}
	var info podmanInfo
	if err := json.Unmarshal(out, &info); err != nil {
		return nil, unavailable(sandbox.ReasonIncompatible, "podman info: %v", err)
	}
	switch {
	case info.Host.Security.Rootless:
		return nil, unavailable(sandbox.ReasonNotPermitted, "podman runs rootless: on cgroup v1 it ignores the memory and pids limits")
	case !info.Host.Security.SeccompEnabled:
		return nil, unavailable(sandbox.ReasonIncompatible, "podman reports seccomp disabled")
	case info.Host.OCIRuntime.Path != e.runc && !sameFile(info.Host.OCIRuntime.Path, e.runc):
		return nil, unavailable(sandbox.ReasonIncompatible, "podman would run %q, not %s", info.Host.OCIRuntime.Path, e.runc)
	case info.Host.CgroupManager != "cgroupfs":
		return nil, unavailable(sandbox.ReasonIncompatible, "podman uses the %q cgroup manager, not cgroupfs", info.Host.CgroupManager)
	case (info.Host.CgroupVersion == "v2") != e.cgroupV2:
		return nil, unavailable(sandbox.ReasonIncompatible, "podman sees cgroup %s, this process cgroup v2=%v", info.Host.CgroupVersion, e.cgroupV2)
	case !filepath.IsAbs(info.Store.GraphRoot) || !filepath.IsAbs(info.Store.RunRoot) || info.Store.GraphDriverName == "":
		return nil, unavailable(sandbox.ReasonIncompatible, "podman info: storage %q %q %q", info.Store.GraphRoot, info.Store.RunRoot, info.Store.GraphDriverName)
	}
	e.graphRoot, e.runRoot, e.graphDriver = info.Store.GraphRoot, info.Store.RunRoot, info.Store.GraphDriverName
	if e.state, err = newPodmanState(e, info.Host.DatabaseBackend); err != nil {
		b.log.Info("podman's state cannot be read directly: runs keep their containers and removal is proven with podman ps", "reason", err)
	}
	return e, nil
}

// forRuntime is the engine whose calls run containers under rt
// (sandbox.RuntimeNative or sandbox.RuntimeGVisor), or an error with
// ReasonRuntimeMissing when runsc is not installed.
func (e *engine) forRuntime(rt string) (*engine, error) {
	rt, err := sandbox.NormalizeRuntime(rt)
	switch {
	case err != nil:
		return nil, unavailable(sandbox.ReasonRuntimeMissing, "%v", err)
	case rt == sandbox.RuntimeNative:
		return e, nil
	case e.runsc == "":
		return nil, unavailable(sandbox.ReasonRuntimeMissing, "gVisor's runsc is not installed where podman and runc are (Debian: apt-get install runsc)")
	}
	g := *e
	g.gvisor = true
	return &g, nil
}

// podmanInfo is the part of `podman info --format json` the probe reads.
type podmanInfo struct {
	Host struct {
		CgroupManager   string `json:"cgroupManager"`
		DatabaseBackend string `json:"databaseBackend"` // podman >= 4.5; before, always boltdb
		CgroupVersion   string `json:"cgroupVersion"`
		OCIRuntime      struct {
			Path string `json:"path"`
		} `json:"ociRuntime"`
		Security struct {
			Rootless       bool `json:"rootless"`
			SeccompEnabled bool `json:"seccompEnabled"`
		} `json:"security"`
	} `json:"host"`
	Store struct {
		GraphRoot       string `json:"graphRoot"`
		RunRoot         string `json:"runRoot"`
		GraphDriverName string `json:"graphDriverName"`
	} `json:"store"`
}

func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(s)
}

// containersConf is this plugin's containers.conf. With CONTAINERS_CONF set
// podman reads it instead of the host's, so no host configuration adds
// volumes, devices, environment, capabilities, sysctls or OCI hooks to the
// sandbox. The run's flags set everything that matters explicitly as well.
const containersConf = `# agentnode podman sandbox backend: written by the plugin, do not edit.
[containers]
annotations = []
default_capabilities = []
default_sysctls = []
devices = []
env = []
env_host = false
http_proxy = false
init = false
mounts = []
no_hosts = true
volumes = []
log_driver = "passthrough"
seccomp_profile = "%s"

[engine]
cgroup_manager = "cgroupfs"
events_logger = "none"
hooks_dir = []
runtime = "runc"
image_default_transport = "containers-storage:"

[engine.runtimes]
runc = ["%s"]
%s`

// writeFiles writes the seccomp profile and containers.conf into the state
// directory, named by their content so that plugin processes of different
// builds never overwrite each other's files, and sets the environment.
func (b *backend) writeFiles(e *engine) error {
	if err := ensureStateDir(b.stateDir); err != nil {
		return unavailable(sandbox.ReasonIncompatible, "state directory: %v", err)
	}
	e.stateDir = b.stateDir
	sc := profile.SeccompDockerJSON()
	var err error
	if e.seccompFile, err = writeByContent(b.stateDir, "seccomp-", ".json", sc); err != nil {
		return unavailable(sandbox.ReasonIncompatible, "seccomp profile: %v", err)
	}
	runsc := ""
	if e.runsc = findBinary(b.searchDirs, "runsc"); e.runsc != "" {
		runsc = fmt.Sprintf("runsc = [%q]\n", e.runsc)
	}
	conf := fmt.Sprintf(containersConf, e.seccompFile, e.runc, runsc)
	if e.confFile, err = writeByContent(b.stateDir, "containers-", ".conf", []byte(conf)); err != nil {
		return unavailable(sandbox.ReasonIncompatible, "containers.conf: %v", err)
	}
	e.env = []string{"PATH=" + searchPath, "CONTAINERS_CONF=" + e.confFile}
	return nil
}

// ensureStateDir creates dir 0700 (and its parents) and checks that it is a
// directory owned by this user that no one else can write, not a symlink.
func ensureStateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s is not owned by uid %d", dir, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by others (%v)", dir, fi.Mode().Perm())
	}
	return nil
}

// writeByContent writes data to dir/<prefix><sha256 prefix><suffix>
// atomically (sdk/atomicfile) unless a file with that content is already
// there, and returns its path.
func writeByContent(dir, prefix, suffix string, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	p := filepath.Join(dir, prefix+hex.EncodeToString(sum[:8])+suffix)
	if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, data) {
		return p, nil
	}
	if err := atomicfile.WriteFile(p, data, 0o600); err != nil {
		return "", err
	}
	return p, nil
}

// seccompProblem says why the kernel cannot install seccomp filters, or "".
func seccompProblem() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Sprintf("reading /proc/self/status: %v", err)
	}
	if !bytes.Contains(b, []byte("\nSeccomp:")) {
		return "the kernel has no seccomp support"
	}
	return ""
}

// requiredV1 are the cgroup v1 controllers the profile's limits depend on.
var requiredV1 = []string{"cpu", "memory", "pids", "devices"}

// cgroupProblem reports whether the host runs cgroup v2 only (as podman
// decides it: /sys/fs/cgroup is cgroup2) and says why the profile's limits
// cannot be enforced, or "". Without swap accounting, --memory-swap is
// dropped by podman with only a warning: refuse instead.
func cgroupProblem() (v2 bool, problem string) {
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		return false, fmt.Sprintf("cgroups: %v", err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		data, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
		if err != nil {
			return true, fmt.Sprintf("cgroup v2: %v", err)
		}
		have := strings.Fields(string(data))
		for _, c := range []string{"cpu", "memory", "pids"} {
			if !contains(have, c) {
				return true, fmt.Sprintf("cgroup v2 controller %q is not available", c)
			}
		}
		if !v2SwapAccounting() {
			return true, "cgroup v2 without swap accounting (memory.swap.max): memory+swap cannot be capped"
		}
		return true, ""
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return false, err.Error()
	}
	found := map[string]string{}
	for _, m := range mounts {
		for _, c := range m.controllers {
			if _, ok := found[c]; !ok {
				found[c] = m.point
			}
		}
	}
	for _, c := range requiredV1 {
		if _, ok := found[c]; !ok {
			return false, fmt.Sprintf("cgroup v1 controller %q is not mounted", c)
		}
	}
	if _, err := os.Stat(filepath.Join(found["memory"], "memory.memsw.limit_in_bytes")); err != nil {
		return false, "cgroup v1 memory controller without swap accounting (memory.memsw.*): memory+swap cannot be capped"
	}
	return false, ""
}

// memoryMount returns where the memory controller's hierarchy is mounted
// at its root: /sys/fs/cgroup on a cgroup v2 host.
func memoryMount(v2 bool) (string, error) {
	if v2 {
		return "/sys/fs/cgroup", nil
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return "", err
	}
	for _, m := range mounts {
		if contains(m.controllers, "memory") {
			return m.point, nil
		}
	}
	return "", errors.New("cgroup v1 controller \"memory\" is not mounted")
}

// v2SwapAccounting looks for memory.swap.max in this process's cgroup or
// one of its ancestors below the root (the root cgroup has none).
func v2SwapAccounting() bool {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			for p := filepath.Clean("/" + rest); p != "/"; p = filepath.Dir(p) {
				if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", p, "memory.swap.max")); err == nil {
					return true
				}
			}
		}
	}
	// A cgroup of our own cannot be inspected: look one level down.
	m, _ := filepath.Glob("/sys/fs/cgroup/*/memory.swap.max")
	return len(m) > 0
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// cgroupMount is one cgroup hierarchy of the host, mounted at its root.
type cgroupMount struct {
	point       string
	v2          bool
	controllers []string // v1: the controllers and name= of the hierarchy
}

// cgroupMounts lists the cgroup hierarchies mounted at their root in this
// process's mount table.
func cgroupMounts() ([]cgroupMount, error) {
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	return cgroupMountsOf(mounts), nil
}

// cgroupMountsOf picks the cgroup hierarchies mounted at their root.
func cgroupMountsOf(mounts []*mountinfo.Info) []cgroupMount {
	var out []cgroupMount
	for _, m := range mounts {
		if m.Root != "/" {
			continue
		}
		switch m.FSType {
		case "cgroup2":
			out = append(out, cgroupMount{point: m.Mountpoint, v2: true})
		case "cgroup":
			var ctl []string
			for _, o := range strings.Split(m.VFSOptions, ",") {
				if o != "rw" && o != "ro" && !strings.Contains(o, "=") || strings.HasPrefix(o, "name=") {
					ctl = append(ctl, o)
				}
			}
			out = append(out, cgroupMount{point: m.Mountpoint, controllers: ctl})
		}
	}
	return out
}

// --- versions ---

// semver is a major.minor version.
type semver struct{ major, minor int }

func (v semver) less(w semver) bool {
	return v.major < w.major || v.major == w.major && v.minor < w.minor
}

func (v semver) String() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }

var versionRE = regexp.MustCompile(`^(\d+)\.(\d+)`)

// parseVersion finds "<prefix>X.Y..." at the start of a line of out.
func parseVersion(out []byte, prefix string) (semver, error) {
	for _, line := range strings.Split(string(out), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
		if !ok {
			continue
		}
		m := versionRE.FindStringSubmatch(rest)
		if m == nil {
			return semver{}, fmt.Errorf("unparsable version %q", rest)
		}
		major, _ := strconv.Atoi(m[1])
		minor, _ := strconv.Atoi(m[2])
		return semver{major, minor}, nil
	}
	return semver{}, fmt.Errorf("no %q line", strings.TrimSpace(prefix))
}

// absent returns nil when p does not exist, and an error saying so when it
// does (or cannot be checked).
func absent(p string) error {
	_, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("%s: %w", p, err)
	}
	return fmt.Errorf("%s still exists", p)
}
