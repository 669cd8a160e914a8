package profile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	agentspecs "github.com/agentnode/agentnode/specs"
)

func mustBase(t *testing.T) *specs.Spec {
	t.Helper()
	s, err := Base()
	if err != nil {
		t.Fatalf("Base: %v", err)
	}
	return s
}

func TestProfileProcess(t *testing.T) {
	s := mustBase(t)
	p := s.Process
	if s.Version != specs.Version {
		t.Errorf("ociVersion = %q, want %q", s.Version, specs.Version)
	}
	if p.User.UID != 1000 || p.User.GID != 1000 {
		t.Errorf("user = %d:%d, want 1000:1000", p.User.UID, p.User.GID)
	}
	if len(p.User.AdditionalGids) != 0 || p.User.Umask != nil || p.User.Username != "" {
		t.Errorf("user has extras: %+v", p.User)
	}
	if !p.NoNewPrivileges {
		t.Error("noNewPrivileges is false")
	}
	if p.Terminal {
		t.Error("terminal is true")
	}
	c := p.Capabilities
	if c == nil {
		t.Fatal("capabilities absent: runtimes would keep their default set")
	}
	for name, set := range map[string][]string{
		"bounding": c.Bounding, "effective": c.Effective, "inheritable": c.Inheritable,
		"permitted": c.Permitted, "ambient": c.Ambient,
	} {
		if len(set) != 0 {
			t.Errorf("capabilities.%s = %v, want empty", name, set)
		}
	}
	if want := []string{"PATH=/bin:/usr/bin", "HOME=" + HomeDir}; !slices.Equal(p.Env, want) {
		t.Errorf("env = %q, want %q", p.Env, want)
	}
	if p.Cwd != tmpDir {
		t.Errorf("cwd = %q, want %q", p.Cwd, tmpDir)
	}
	if len(p.Args) != 0 {
		t.Errorf("args = %q, want empty until ForRun", p.Args)
	}
	if p.OOMScoreAdj != nil || p.ApparmorProfile != "" || p.SelinuxLabel != "" || p.Scheduler != nil || p.IOPriority != nil {
		t.Errorf("process has settings the README does not document: %+v", p)
	}
}

func TestProfileRlimits(t *testing.T) {
	s := mustBase(t)
	got := map[string]specs.POSIXRlimit{}
	for _, r := range s.Process.Rlimits {
		if _, dup := got[r.Type]; dup {
			t.Errorf("rlimit %s twice", r.Type)
		}
		got[r.Type] = r
		if r.Soft > r.Hard {
			t.Errorf("rlimit %s soft %d > hard %d", r.Type, r.Soft, r.Hard)
		}
	}
	if r := got["RLIMIT_NOFILE"]; r.Hard != 1024 || r.Soft != 1024 {
		t.Errorf("RLIMIT_NOFILE = %+v, want 1024/1024", r)
	}
	// The host this profile is made for has a hard NOFILE of 20000: the
	// profile itself must stay below it even before ForRun clamps.
	if r := got["RLIMIT_NOFILE"]; r.Hard > 20000 {
		t.Errorf("RLIMIT_NOFILE hard %d above 20000", r.Hard)
	}
	if r, ok := got["RLIMIT_CORE"]; !ok || r.Hard != 0 || r.Soft != 0 {
		t.Errorf("RLIMIT_CORE = %+v (present %v), want 0/0", r, ok)
	}
	if r, ok := got["RLIMIT_FSIZE"]; !ok || r.Hard != 1<<30 || r.Soft != r.Hard {
		t.Errorf("RLIMIT_FSIZE = %+v (present %v), want 1 GiB/1 GiB", r, ok)
	}
	r, ok := got["RLIMIT_NPROC"]
	if !ok || r.Hard == 0 || r.Hard != r.Soft {
		t.Errorf("RLIMIT_NPROC = %+v (present %v), want soft = hard > 0", r, ok)
	}
	// NPROC counts every process of host uid 1000, so it must leave room
	// for the pids limit of several sandboxes at once.
	if lim := *s.Linux.Resources.Pids.Limit; ok && int64(r.Hard) < 4*lim {
		t.Errorf("RLIMIT_NPROC %d < 4 x pids limit %d", r.Hard, lim)
	}
	for typ := range got {
		if _, known := rlimitResources[typ]; !known {
			t.Errorf("rlimit %s unknown", typ)
		}
	}
}

func TestProfileRootAndNamespaces(t *testing.T) {
	s := mustBase(t)
	if !s.Root.Readonly {
		t.Error("root.readonly is false")
	}
	if s.Root.Path != "" {
		t.Errorf("root.path = %q, want empty until ForRun", s.Root.Path)
	}
	if s.Hostname != "sandbox" || s.Domainname != "" {
		t.Errorf("hostname %q domainname %q", s.Hostname, s.Domainname)
	}
	var types []string
	for _, n := range s.Linux.Namespaces {
		if n.Path != "" {
			t.Errorf("namespace %s joins %s", n.Type, n.Path)
		}
		types = append(types, string(n.Type))
	}
	slices.Sort(types)
	if want := []string{"cgroup", "ipc", "mount", "network", "pid", "uts"}; !slices.Equal(types, want) {
		t.Errorf("namespaces = %v, want %v", types, want)
	}
	l := s.Linux
	if len(l.UIDMappings)+len(l.GIDMappings) != 0 || len(l.Sysctl) != 0 || len(l.Devices) != 0 ||
		l.CgroupsPath != "" || l.RootfsPropagation != "" || l.Personality != nil || l.IntelRdt != nil {
		t.Errorf("linux has settings the README does not document: %+v", l)
	}
	if s.Hooks != nil {
		t.Error("hooks are set")
	}
}

func TestProfileMounts(t *testing.T) {
	s := mustBase(t)
	type want struct {
		typ  string
		opts []string // must all be present
		size string   // the size= value, "" = no size option
	}
	wants := map[string]want{
		"/proc":          {"proc", []string{"nosuid", "noexec", "nodev"}, ""},
		"/dev":           {"tmpfs", []string{"nosuid", "noexec", "strictatime", "mode=755"}, "64k"},
		"/dev/shm":       {"tmpfs", []string{"nosuid", "noexec", "nodev", "mode=1777"}, "16m"},
		"/dev/mqueue":    {"mqueue", []string{"nosuid", "noexec", "nodev"}, ""},
		"/sys":           {"sysfs", []string{"nosuid", "noexec", "nodev", "ro"}, ""},
		"/sys/fs/cgroup": {"cgroup", []string{"nosuid", "noexec", "nodev", "ro"}, ""},
		"/tmp":           {"tmpfs", []string{"nosuid", "nodev", "noexec", "mode=1777"}, "64m"},
		HomeDir:          {"tmpfs", []string{"nosuid", "nodev", "noexec", "mode=700", "uid=1000", "gid=1000"}, "16m"},
		PackDir:          {"bind", []string{"bind", "ro", "nosuid", "nodev"}, ""},
		// Optional: only with Spec.EgressSocket (ForRun removes it otherwise).
		EgressSocketPath: {"bind", []string{"bind", "ro", "nosuid", "nodev", "noexec"}, ""},
	}
	seen := map[string]int{}
	for i, m := range s.Mounts {
		w, ok := wants[m.Destination]
		if !ok {
			t.Errorf("unexpected mount %s (%s)", m.Destination, m.Type)
			continue
		}
		if _, dup := seen[m.Destination]; dup {
			t.Errorf("mount %s twice", m.Destination)
		}
		seen[m.Destination] = i
		if m.Type != w.typ {
			t.Errorf("mount %s type %q, want %q", m.Destination, m.Type, w.typ)
		}
		for _, o := range w.opts {
			if !slices.Contains(m.Options, o) {
				t.Errorf("mount %s options %v lack %q", m.Destination, m.Options, o)
			}
		}
		if got := optionValue(m.Options, "size="); got != w.size {
			t.Errorf("mount %s size %q, want %q", m.Destination, got, w.size)
		}
		// Generic rules: nothing setuid anywhere; nothing writable is
		// executable; device nodes only in /dev; no recursive binds (they
		// would carry host submounts in); no shared propagation.
		if !slices.Contains(m.Options, "nosuid") {
			t.Errorf("mount %s lacks nosuid", m.Destination)
		}
		if m.Destination != "/dev" && !slices.Contains(m.Options, "nodev") {
			t.Errorf("mount %s lacks nodev", m.Destination)
		}
		if !slices.Contains(m.Options, "ro") && !slices.Contains(m.Options, "noexec") {
			t.Errorf("mount %s is writable and executable", m.Destination)
		}
		for _, o := range m.Options {
			switch o {
			case "rbind", "shared", "rshared", "slave", "rslave", "exec", "suid", "dev", "rw":
				t.Errorf("mount %s has option %q", m.Destination, o)
			}
		}
	}
	for d := range wants {
		if _, ok := seen[d]; !ok {
			t.Errorf("mount %s missing", d)
		}
	}
	if _, ok := seen["/dev/pts"]; ok {
		t.Error("/dev/pts is mounted: the sandbox has no terminal")
	}
	// Parents before children, or the child is hidden under the parent.
	for child, parent := range map[string]string{"/dev/shm": "/dev", "/dev/mqueue": "/dev", "/sys/fs/cgroup": "/sys"} {
		if seen[child] < seen[parent] {
			t.Errorf("mount %s comes before its parent %s", child, parent)
		}
	}
	for _, d := range []string{PackDir, EgressSocketPath} {
		if m, _ := mountAt(s, d); m != nil && m.Source != "" {
			t.Errorf("%s source %q, want empty until ForRun", d, m.Source)
		}
	}
}

// TestProfileEgressAnnotations: the constants the code (and the image
// builder) use are profile.json's annotations, and Base refuses a file
// that disagrees.
func TestProfileEgressAnnotations(t *testing.T) {
	s := mustBase(t)
	want := map[string]string{
		"org.agentnode.egress.socket":    "/run/agentnode/egress.sock",
		"org.agentnode.egress.forwarder": "/usr/libexec/agentnode/egress-forwarder",
		"org.agentnode.egress.listen":    "127.0.0.1:3128",
	}
	for k, v := range want {
		if s.Annotations[k] != v || egressAnnotations[k] != v {
			t.Errorf("annotation %s = %q (code %q), want %q", k, s.Annotations[k], egressAnnotations[k], v)
		}
	}
	if EgressProxyURL != "http://127.0.0.1:3128" {
		t.Errorf("EgressProxyURL = %q", EgressProxyURL)
	}
	// A profile.json edited to move the socket is refused, not followed.
	saved := profileJSON
	t.Cleanup(func() { profileJSON = saved })
	profileJSON = []byte(strings.Replace(string(saved), `"org.agentnode.egress.socket": "/run/agentnode/egress.sock"`,
		`"org.agentnode.egress.socket": "/tmp/egress.sock"`, 1))
	if string(profileJSON) == string(saved) {
		t.Fatal("the test's replacement did not apply")
	}
	if _, err := Base(); err == nil || !strings.Contains(err.Error(), "org.agentnode.egress.socket") {
		t.Errorf("Base with a moved egress socket: %v", err)
	}
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// optionValue returns the value of the option starting with prefix.
func optionValue(opts []string, prefix string) string {
	for _, o := range opts {
		if v, ok := strings.CutPrefix(o, prefix); ok {
			return v
		}
	}
	return ""
}

// Docker's and runc's defaults (moby daemon/pkg/oci defaults, runc
// specconv.Example): the profile must be at least this strict.
var (
	dockerMasked = []string{
		"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
		"/sys/devices/virtual/powercap",
	}
	dockerReadonly = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

func TestProfileMaskedAndReadonlyPaths(t *testing.T) {
	s := mustBase(t)
	for _, p := range append(slices.Clone(dockerMasked), "/proc/sysrq-trigger", "/proc/kallsyms") {
		if !slices.Contains(s.Linux.MaskedPaths, p) {
			t.Errorf("maskedPaths lacks %s", p)
		}
	}
	for _, p := range dockerReadonly {
		if !slices.Contains(s.Linux.ReadonlyPaths, p) {
			t.Errorf("readonlyPaths lacks %s", p)
		}
	}
	for _, p := range append(slices.Clone(s.Linux.MaskedPaths), s.Linux.ReadonlyPaths...) {
		if !strings.HasPrefix(p, "/proc/") && !strings.HasPrefix(p, "/sys/") {
			t.Errorf("masked/readonly path %s outside /proc and /sys", p)
		}
	}
}

func TestProfileResources(t *testing.T) {
	s := mustBase(t)
	r := s.Linux.Resources
	if len(r.Devices) == 0 || r.Devices[0].Allow || r.Devices[0].Access != "rwm" || r.Devices[0].Type != "" ||
		r.Devices[0].Major != nil || r.Devices[0].Minor != nil {
		t.Errorf("devices cgroup does not start with deny-all: %+v", r.Devices)
	}
	for _, d := range r.Devices[1:] {
		if d.Allow {
			t.Errorf("device rule allows %+v: the runtime's default set is the only allowance", d)
		}
	}
	if r.Memory == nil || r.Memory.Limit == nil || *r.Memory.Limit != 512<<20 {
		t.Errorf("memory = %s, want a 512 MiB limit", jsonOf(r.Memory))
	} else if r.Memory.Swap == nil || *r.Memory.Swap != *r.Memory.Limit {
		t.Errorf("memory = %s, want memory+swap = the memory limit (no swap)", jsonOf(r.Memory))
	}
	if r.Pids == nil || r.Pids.Limit == nil || *r.Pids.Limit != 256 {
		t.Errorf("pids = %s, want 256", jsonOf(r.Pids))
	}
	if r.CPU == nil || r.CPU.Quota == nil || r.CPU.Period == nil || *r.CPU.Quota != 100000 || *r.CPU.Period != 100000 {
		t.Errorf("cpu = %s, want quota 100000 period 100000", jsonOf(r.CPU))
	}
}

func TestProfileFileReferencesSeccomp(t *testing.T) {
	// profile.json names the seccomp file instead of inlining it, so there
	// is one source; Base must then carry exactly Seccomp().
	var raw map[string]any
	if err := json.Unmarshal(profileJSON, &raw); err != nil {
		t.Fatal(err)
	}
	if _, inlined := raw["linux"].(map[string]any)["seccomp"]; inlined {
		t.Error("profile.json inlines linux.seccomp")
	}
	ref := raw["annotations"].(map[string]any)["org.agentnode.seccomp"]
	if ref != "specs/"+seccompFile {
		t.Errorf("annotation org.agentnode.seccomp = %v, want specs/%s", ref, seccompFile)
	}
	if _, err := fs.Stat(agentspecs.Seccomp, seccompFile); err != nil {
		t.Errorf("referenced file: %v", err)
	}
	sc, err := Seccomp()
	if err != nil {
		t.Fatal(err)
	}
	if got := mustBase(t).Linux.Seccomp; !reflect.DeepEqual(got, sc) {
		t.Error("Base().Linux.Seccomp differs from Seccomp()")
	}
	// The embedded bytes are the file in the repository.
	disk, err := os.ReadFile("../../../specs/" + profileFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(disk, profileJSON) {
		t.Error("embedded profile differs from specs/" + profileFile)
	}
}

func TestBaseRejectsBrokenProfiles(t *testing.T) {
	// checkHardened is what stops a bad edit of profile.json.
	for name, edit := range map[string]func(*specs.Spec){
		"uid 0":            func(s *specs.Spec) { s.Process.User.UID = 0 },
		"gid 0":            func(s *specs.Spec) { s.Process.User.GID = 0 },
		"extra gid":        func(s *specs.Spec) { s.Process.User.AdditionalGids = []uint32{0} },
		"no nnp":           func(s *specs.Spec) { s.Process.NoNewPrivileges = false },
		"caps absent":      func(s *specs.Spec) { s.Process.Capabilities = nil },
		"a capability":     func(s *specs.Spec) { s.Process.Capabilities.Bounding = []string{"CAP_KILL"} },
		"ambient":          func(s *specs.Spec) { s.Process.Capabilities.Ambient = []string{"CAP_NET_RAW"} },
		"terminal":         func(s *specs.Spec) { s.Process.Terminal = true },
		"writable root":    func(s *specs.Spec) { s.Root.Readonly = false },
		"no seccomp":       func(s *specs.Spec) { s.Linux.Seccomp = nil },
		"allow seccomp":    func(s *specs.Spec) { s.Linux.Seccomp.DefaultAction = specs.ActAllow },
		"log seccomp":      func(s *specs.Spec) { s.Linux.Seccomp.DefaultAction = specs.ActLog },
		"no netns":         func(s *specs.Spec) { s.Linux.Namespaces = dropNS(s.Linux.Namespaces, specs.NetworkNamespace) },
		"no pidns":         func(s *specs.Spec) { s.Linux.Namespaces = dropNS(s.Linux.Namespaces, specs.PIDNamespace) },
		"no mntns":         func(s *specs.Spec) { s.Linux.Namespaces = dropNS(s.Linux.Namespaces, specs.MountNamespace) },
		"host netns joins": func(s *specs.Spec) { s.Linux.Namespaces[1].Path = "/proc/1/ns/net" },
	} {
		s := mustBase(t)
		edit(s)
		if err := checkHardened(s); err == nil {
			t.Errorf("%s: checkHardened accepted it", name)
		}
	}
	if err := checkHardened(mustBase(t)); err != nil {
		t.Errorf("checkHardened(Base()): %v", err)
	}
}

func dropNS(ns []specs.LinuxNamespace, t specs.LinuxNamespaceType) []specs.LinuxNamespace {
	return slices.DeleteFunc(slices.Clone(ns), func(n specs.LinuxNamespace) bool { return n.Type == t })
}

// amd64Syscalls reads testdata/syscalls_amd64.txt.
func amd64Syscalls(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open("testdata/syscalls_amd64.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, num, ok := strings.Cut(line, " ")
		n, err := strconv.Atoi(num)
		if !ok || err != nil {
			t.Fatalf("bad line %q", line)
		}
		m[name] = n
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// Spot checks that the table is the x86_64 one.
	if m["read"] != unix.SYS_READ || m["socket"] != unix.SYS_SOCKET || m["clone3"] != unix.SYS_CLONE3 ||
		m["getpid"] != unix.SYS_GETPID || m["io_uring_setup"] != unix.SYS_IO_URING_SETUP {
		t.Fatal("testdata/syscalls_amd64.txt is not the x86_64 table")
	}
	return m
}
