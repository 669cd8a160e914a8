package profile

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/sdk/sandbox"
)

func validRun() sandbox.Spec {
	return sandbox.Spec{
		RunID:      "run-1",
		Image:      "agentnode/sandbox@sha256:" + strings.Repeat("ab", 32),
		PackageDir: "/var/lib/agentnode/packages/demo/1.0.0",
		ImageStore: "/var/lib/agentnode/images",
		Args:       []string{"/bin/sh", "-c", "echo hi"},
		Env:        []string{"AGENTNODE_TOOL=demo", "LANG=C.UTF-8"},
	}
}

func mustForRun(t *testing.T, run sandbox.Spec) *specs.Spec {
	t.Helper()
	s, err := ForRun(run)
	if err != nil {
		t.Fatalf("ForRun: %v", err)
	}
	return s
}

func TestForRunFills(t *testing.T) {
	run := validRun()
	run.ImageStore = "/var/lib/agentnode/images/../images/"
	run.PackageDir = "/var/lib/agentnode/packages/demo/1.0.0/"
	s := mustForRun(t, run)
	if s.Root.Path != "/var/lib/agentnode/images/rootfs/"+strings.Repeat("ab", 32) {
		t.Errorf("root.path = %q", s.Root.Path)
	}
	if !slices.Equal(s.Process.Args, run.Args) {
		t.Errorf("args = %q", s.Process.Args)
	}
	if want := []string{"PATH=/bin:/usr/bin", "HOME=/sandbox-home", "AGENTNODE_TOOL=demo", "LANG=C.UTF-8"}; !slices.Equal(s.Process.Env, want) {
		t.Errorf("env = %q, want %q", s.Process.Env, want)
	}
	pack, err := mountAt(s, PackDir)
	if err != nil {
		t.Fatal(err)
	}
	if pack.Source != "/var/lib/agentnode/packages/demo/1.0.0" || pack.Type != "bind" || !slices.Contains(pack.Options, "ro") {
		t.Errorf("/pack = %+v", pack)
	}
	// Zero limits keep the profile's defaults.
	base := mustBase(t)
	if !reflect.DeepEqual(s.Linux.Resources, base.Linux.Resources) {
		t.Errorf("zero limits changed resources: %+v", s.Linux.Resources)
	}
	tmp, _ := mountAt(s, tmpDir)
	if optionValue(tmp.Options, "size=") != "64m" {
		t.Errorf("/tmp options %v", tmp.Options)
	}
	// The caller's slices are copied, not aliased.
	run.Args[0] = "/bin/evil"
	run.Env[0] = "PATH=/evil"
	if s.Process.Args[0] != "/bin/sh" || slices.Contains(s.Process.Env, "PATH=/evil") {
		t.Error("ForRun aliases the caller's Args or Env")
	}
	if s.Linux.Seccomp == nil || len(s.Linux.Seccomp.Syscalls) == 0 {
		t.Error("seccomp missing")
	}
}

func TestForRunLimits(t *testing.T) {
	run := validRun()
	run.Limits = sandbox.Limits{MemoryBytes: 256 << 20, Pids: 64, CPUs: 0.5, TmpBytes: 8 << 20}
	s := mustForRun(t, run)
	r := s.Linux.Resources
	if *r.Memory.Limit != 256<<20 || *r.Memory.Swap != 256<<20 {
		t.Errorf("memory %d swap %d, want 256 MiB both", *r.Memory.Limit, *r.Memory.Swap)
	}
	if *r.Pids.Limit != 64 {
		t.Errorf("pids %d", *r.Pids.Limit)
	}
	if *r.CPU.Quota != 50000 || *r.CPU.Period != 100000 {
		t.Errorf("cpu quota %d period %d, want 50000/100000", *r.CPU.Quota, *r.CPU.Period)
	}
	tmp, _ := mountAt(s, tmpDir)
	if got := optionValue(tmp.Options, "size="); got != "8388608" {
		t.Errorf("/tmp size %q, want 8388608", got)
	}
	if n := len(slices.DeleteFunc(slices.Clone(tmp.Options), func(o string) bool { return !strings.HasPrefix(o, "size=") })); n != 1 {
		t.Errorf("/tmp has %d size options", n)
	}
	for _, c := range []struct {
		cpus  float64
		quota int64
	}{{1, 100000}, {2, 200000}, {1.5, 150000}, {0.01, 1000}, {0.333333, 33333}} {
		run.Limits = sandbox.Limits{CPUs: c.cpus}
		if q := *mustForRun(t, run).Linux.Resources.CPU.Quota; q != c.quota {
			t.Errorf("CPUs %v: quota %d, want %d", c.cpus, q, c.quota)
		}
	}
}

func TestForRunRlimitsWithinHost(t *testing.T) {
	s := mustForRun(t, validRun())
	for _, r := range s.Process.Rlimits {
		var host unix.Rlimit
		if err := unix.Getrlimit(rlimitResources[r.Type], &host); err != nil {
			t.Fatal(err)
		}
		if r.Hard > host.Max || r.Soft > r.Hard {
			t.Errorf("%s = %d/%d, host hard %d", r.Type, r.Soft, r.Hard, host.Max)
		}
	}
	// Clamping lowers, never raises.
	rl := []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: math.MaxUint64, Soft: math.MaxUint64}, {Type: "RLIMIT_CORE"}}
	if err := clampRlimits(rl); err != nil {
		t.Fatal(err)
	}
	var host unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &host); err != nil {
		t.Fatal(err)
	}
	if rl[0].Hard != host.Max || rl[0].Soft != host.Max || rl[1].Hard != 0 || rl[1].Soft != 0 {
		t.Errorf("clamped to %+v, host NOFILE hard %d", rl, host.Max)
	}
	if err := clampRlimits([]specs.POSIXRlimit{{Type: "RLIMIT_BOGUS"}}); err == nil {
		t.Error("unknown rlimit accepted")
	}
}

func TestForRunRootIsTheStoresRootfs(t *testing.T) {
	// The root is always the image's rootfs in the store, never a path the
	// host names (Docker and Podman run the image and ignore it).
	run := validRun()
	run.Image = "registry.example:5000/a/b@sha256:" + strings.Repeat("cd", 32)
	if s := mustForRun(t, run); s.Root.Path != "/var/lib/agentnode/images/rootfs/"+strings.Repeat("cd", 32) || !s.Root.Readonly {
		t.Errorf("root = %+v", s.Root)
	}
}

func TestForRunRejects(t *testing.T) {
	for _, c := range []struct {
		name  string
		edit  func(*sandbox.Spec)
		field string
	}{
		{"relative store", func(r *sandbox.Spec) { r.ImageStore = "images" }, "ImageStore"},
		{"dot store", func(r *sandbox.Spec) { r.ImageStore = "./images" }, "ImageStore"},
		{"no store", func(r *sandbox.Spec) { r.ImageStore = "" }, "ImageStore"},
		{"no image", func(r *sandbox.Spec) { r.Image = "" }, "Image"},
		{"image by tag", func(r *sandbox.Spec) { r.Image = "agentnode/sandbox:latest" }, "Image"},
		{"short digest", func(r *sandbox.Spec) { r.Image = "agentnode/sandbox@sha256:abcd" }, "Image"},
		{"placeholder image", func(r *sandbox.Spec) { r.Image = "agentnode/sandbox@sha256:" + strings.Repeat("0", 64) }, "Image"},
		{"digest escaping the store", func(r *sandbox.Spec) { r.Image = "a@sha256:../../../../../../etc" + strings.Repeat("a", 50) }, "Image"},
		{"no args", func(r *sandbox.Spec) { r.Args = nil }, "Args"},
		{"empty args", func(r *sandbox.Spec) { r.Args = []string{} }, "Args"},
		{"empty argv0", func(r *sandbox.Spec) { r.Args = []string{"", "x"} }, "Args[0]"},
		{"NUL in arg", func(r *sandbox.Spec) { r.Args = []string{"/bin/sh", "a\x00b"} }, "Args[1]"},
		{"no package dir", func(r *sandbox.Spec) { r.PackageDir = "" }, "PackageDir"},
		{"host root as package", func(r *sandbox.Spec) { r.PackageDir = "//" }, "PackageDir"},
		{"relative package dir", func(r *sandbox.Spec) { r.PackageDir = "pkgs/demo" }, "PackageDir"},
		{"PATH override", func(r *sandbox.Spec) { r.Env = []string{"PATH=/tmp"} }, "Env[0]"},
		{"HOME override", func(r *sandbox.Spec) { r.Env = []string{"A=1", "HOME=/root"} }, "Env[1]"},
		{"not KEY=VALUE", func(r *sandbox.Spec) { r.Env = []string{"JUSTAKEY"} }, "Env[0]"},
		{"empty key", func(r *sandbox.Spec) { r.Env = []string{"=x"} }, "Env[0]"},
		{"duplicate key", func(r *sandbox.Spec) { r.Env = []string{"A=1", "A=2"} }, "Env[1]"},
		{"NUL in env", func(r *sandbox.Spec) { r.Env = []string{"A=1\x00B=2"} }, "Env[0]"},
		{"negative memory", func(r *sandbox.Spec) { r.Limits.MemoryBytes = -1 }, "Limits.MemoryBytes"},
		{"tiny memory", func(r *sandbox.Spec) { r.Limits.MemoryBytes = 1 << 20 }, "Limits.MemoryBytes"},
		{"unlimited pids", func(r *sandbox.Spec) { r.Limits.Pids = -1 }, "Limits.Pids"},
		{"negative cpus", func(r *sandbox.Spec) { r.Limits.CPUs = -0.5 }, "Limits.CPUs"},
		{"NaN cpus", func(r *sandbox.Spec) { r.Limits.CPUs = math.NaN() }, "Limits.CPUs"},
		{"Inf cpus", func(r *sandbox.Spec) { r.Limits.CPUs = math.Inf(1) }, "Limits.CPUs"},
		{"too few cpus", func(r *sandbox.Spec) { r.Limits.CPUs = 0.001 }, "Limits.CPUs"},
		{"too many cpus", func(r *sandbox.Spec) { r.Limits.CPUs = 1e9 }, "Limits.CPUs"},
		{"negative tmp", func(r *sandbox.Spec) { r.Limits.TmpBytes = -1 }, "Limits.TmpBytes"},
		{"relative workspace", func(r *sandbox.Spec) { r.Workspace = &sandbox.Workspace{Path: "ws"} }, "Workspace.Path"},
		{"unclean workspace", func(r *sandbox.Spec) { r.Workspace = &sandbox.Workspace{Path: "/home/u/../u"} }, "Workspace.Path"},
		{"root workspace", func(r *sandbox.Spec) { r.Workspace = &sandbox.Workspace{Path: "/"} }, "Workspace.Path"},
		{"workspace at /pack", func(r *sandbox.Spec) { r.Workspace = &sandbox.Workspace{Path: "/pack"} }, "Workspace.Path"},
		{"workspace below /pack", func(r *sandbox.Spec) { r.Workspace = &sandbox.Workspace{Path: "/pack/x"} }, "Workspace.Path"},
		{"workspace at /tmp", func(r *sandbox.Spec) { r.Workspace = &sandbox.Workspace{Path: "/tmp"} }, "Workspace.Path"},
		{"workspace over /dev", func(r *sandbox.Spec) { r.Workspace = &sandbox.Workspace{Path: "/dev/shm/x"} }, "Workspace.Path"},
		{"workspace over /sys", func(r *sandbox.Spec) { r.Workspace = &sandbox.Workspace{Path: "/sys"} }, "Workspace.Path"},
		{"workspace above egress", func(r *sandbox.Spec) { r.Workspace = &sandbox.Workspace{Path: "/run"} }, "Workspace.Path"},
		{"workspace at HOME", func(r *sandbox.Spec) { r.Workspace = &sandbox.Workspace{Path: HomeDir} }, "Workspace.Path"},
		{"workspace holding an engine socket", func(r *sandbox.Spec) { r.Workspace = &sandbox.Workspace{Path: "/var/run"} }, "Workspace.Path"},
		{"workspace holding podman's socket", func(r *sandbox.Spec) { r.Workspace = &sandbox.Workspace{Path: "/run/podman"} }, "Workspace.Path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := validRun()
			c.edit(&run)
			s, err := ForRun(run)
			if err == nil {
				t.Fatalf("accepted: %+v", s)
			}
			if s != nil {
				t.Error("returned a spec with the error")
			}
			if !strings.Contains(err.Error(), c.field+":") {
				t.Errorf("error %q does not name %s", err, c.field)
			}
		})
	}
}

// TestForRunDoesNotMutateBase: every call starts from the embedded profile;
// what one run (or a caller editing the result) did is invisible to the
// next.
func TestForRunDoesNotMutateBase(t *testing.T) {
	before := mustBase(t)

	first := validRun()
	first.Limits = sandbox.Limits{MemoryBytes: 64 << 20, Pids: 10, CPUs: 3, TmpBytes: 1 << 20}
	first.Env = []string{"FIRST=1"}
	a := mustForRun(t, first)
	// Vandalise the first result everywhere it could share memory.
	a.Process.Env[0] = "PATH=/evil"
	a.Process.Rlimits[0].Hard = 1 << 40
	a.Process.Capabilities.Bounding = append(a.Process.Capabilities.Bounding, "CAP_SYS_ADMIN")
	a.Mounts[0].Options[0] = "suid"
	a.Linux.MaskedPaths[0] = "/nothing"
	*a.Linux.Resources.Memory.Limit = 1
	a.Linux.Seccomp.Syscalls[0].Names = append(a.Linux.Seccomp.Syscalls[0].Names, "vandalised")
	a.Linux.Seccomp.Syscalls[1].Args[0].Value = 0
	a.Linux.Namespaces = a.Linux.Namespaces[:1]

	second := validRun()
	second.Args = []string{"/pack/tool"}
	b := mustForRun(t, second)

	if slices.Contains(b.Process.Env, "FIRST=1") || b.Process.Env[0] != "PATH=/bin:/usr/bin" {
		t.Errorf("second run's env %q", b.Process.Env)
	}
	if !slices.Equal(b.Process.Args, []string{"/pack/tool"}) {
		t.Errorf("second run's args %q", b.Process.Args)
	}
	if *b.Linux.Resources.Memory.Limit != 512<<20 || *b.Linux.Resources.Pids.Limit != 256 || *b.Linux.Resources.CPU.Quota != 100000 {
		t.Errorf("second run inherited limits: %+v", b.Linux.Resources)
	}
	tmp, _ := mountAt(b, tmpDir)
	if optionValue(tmp.Options, "size=") != "64m" {
		t.Errorf("second run's /tmp %v", tmp.Options)
	}
	if len(b.Process.Capabilities.Bounding) != 0 || b.Mounts[0].Options[0] != "nosuid" || b.Linux.MaskedPaths[0] == "/nothing" {
		t.Error("second run sees the first result's edits")
	}
	if slices.Contains(b.Linux.Seccomp.Syscalls[0].Names, "vandalised") || b.Linux.Seccomp.Syscalls[1].Args[0].Value == 0 {
		t.Error("second run sees edits to the first run's seccomp")
	}
	if after := mustBase(t); !reflect.DeepEqual(before, after) {
		t.Error("Base changed across ForRun calls")
	}
}

// BenchmarkForRun: the profile is decoded for every run (that is what makes
// each result independent); this keeps an eye on what that costs.
func BenchmarkForRun(b *testing.B) {
	run := validRun()
	for b.Loop() {
		if _, err := ForRun(run); err != nil {
			b.Fatal(err)
		}
	}
}

// TestForRunWorkspace: the workspace is a bind mount at its own path,
// nosuid, nodev, noexec, read-only unless writable, and the working
// directory; without one, nothing of it appears.
func TestForRunWorkspace(t *testing.T) {
	base := mustForRun(t, validRun())
	for _, c := range []struct {
		path     string
		writable bool
		mode     string
	}{{"/home/u/project", false, "ro"}, {"/srv/data", true, "rw"}, {"/tmp/x/ws", true, "rw"}} {
		run := validRun()
		run.Workspace = &sandbox.Workspace{Path: c.path, Writable: c.writable}
		s := mustForRun(t, run)
		m, err := mountAt(s, c.path)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"bind", "nosuid", "nodev", "noexec", c.mode}
		if m.Source != c.path || m.Type != "bind" || !slices.Equal(m.Options, want) {
			t.Errorf("%s: mount %+v, want bind of itself with %v", c.path, m, want)
		}
		if s.Mounts[len(s.Mounts)-1].Destination != c.path {
			t.Errorf("%s: the workspace is not mounted last (after /tmp)", c.path)
		}
		if s.Process.Cwd != c.path {
			t.Errorf("%s: cwd %q", c.path, s.Process.Cwd)
		}
		if len(s.Mounts) != len(base.Mounts)+1 {
			t.Errorf("%s: %d mounts, want %d", c.path, len(s.Mounts), len(base.Mounts)+1)
		}
	}
	if base.Process.Cwd != tmpDir {
		t.Errorf("cwd without a workspace %q", base.Process.Cwd)
	}
}

// TestCheckWorkspace: the backend's check right before mounting refuses a
// workspace whose path now goes through a symlink (a component swapped
// since the host resolved it), one that is no longer a directory or is
// gone, and what ForRun refuses by form; a real directory passes.
func TestCheckWorkspace(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	if err := os.MkdirAll(filepath.Join(root, "real", "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckWorkspace(sandbox.Workspace{Path: ws}); err != nil {
		t.Fatalf("a directory: %v", err)
	}
	swapped := filepath.Join(root, "swapped")
	if err := os.Symlink(filepath.Join(root, "real"), swapped); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(swapped, "ws"), swapped, file, filepath.Join(root, "gone"), "rel", "/"} {
		if err := CheckWorkspace(sandbox.Workspace{Path: p}); err == nil || !strings.Contains(err.Error(), "Workspace.Path") {
			t.Errorf("%s: %v, want a Workspace.Path refusal", p, err)
		}
	}
}
