package profile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/configs/validate"
	"github.com/opencontainers/runc/libcontainer/specconv"
	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/sdk/sandbox/imagestore"
)

// TestSpecconv converts ForRun's spec the way the libcontainer backend does
// (runc's specconv, an absolute cgroups path, no systemd, not rootless) and
// checks that what libcontainer will enforce is still the profile.
func TestSpecconv(t *testing.T) {
	// EvalSymlinks: validate.Validate insists on a rootfs path without
	// symlinks, and TMPDIR may contain one.
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	run := validRun()
	store, pack := filepath.Join(dir, "images"), filepath.Join(dir, "pack")
	rootfs, err := imagestore.RootfsDir(store, run.Image)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{rootfs, pack} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run.ImageStore, run.PackageDir = store, pack
	spec := mustForRun(t, run)
	spec.Linux.CgroupsPath = "/agentnode/test"

	cfg, err := specconv.CreateLibcontainerConfig(&specconv.CreateOpts{
		CgroupName: "test",
		Spec:       spec,
	})
	if err != nil {
		t.Fatalf("CreateLibcontainerConfig: %v", err)
	}

	if !slices.ContainsFunc(cfg.Networks, func(n *configs.Network) bool { return n.Type == "loopback" }) {
		t.Errorf("networks = %+v, want loopback (new network namespace)", cfg.Networks)
	}
	if !cfg.Readonlyfs {
		t.Error("Readonlyfs is false")
	}
	if !cfg.NoNewPrivileges {
		t.Error("NoNewPrivileges is false")
	}
	if cfg.Seccomp == nil {
		t.Fatal("Seccomp is nil")
	}
	if cfg.Seccomp.DefaultAction != configs.Errno || cfg.Seccomp.DefaultErrnoRet == nil || *cfg.Seccomp.DefaultErrnoRet != uint(unix.EPERM) {
		t.Errorf("seccomp default %v errno %v, want Errno EPERM", cfg.Seccomp.DefaultAction, cfg.Seccomp.DefaultErrnoRet)
	}
	if !slices.Equal(cfg.Seccomp.Architectures, []string{"amd64"}) {
		t.Errorf("seccomp architectures %v, want [amd64]", cfg.Seccomp.Architectures)
	}
	if len(cfg.Seccomp.Syscalls) < 250 {
		t.Errorf("seccomp has %d rules", len(cfg.Seccomp.Syscalls))
	}
	if cfg.Rootfs != rootfs {
		t.Errorf("Rootfs %q, want %q", cfg.Rootfs, rootfs)
	}
	if cfg.Hostname != "sandbox" {
		t.Errorf("Hostname %q", cfg.Hostname)
	}
	if c := cfg.Capabilities; c == nil || len(c.Bounding)+len(c.Effective)+len(c.Permitted)+len(c.Inheritable)+len(c.Ambient) != 0 {
		t.Errorf("capabilities %+v, want present and empty", c)
	}
	for _, ns := range []configs.NamespaceType{configs.NEWPID, configs.NEWNET, configs.NEWIPC, configs.NEWUTS, configs.NEWNS, configs.NEWCGROUP} {
		if !cfg.Namespaces.IsPrivate(ns) {
			t.Errorf("namespace %s not private", ns)
		}
	}
	if cfg.Namespaces.Contains(configs.NEWUSER) {
		t.Error("user namespace present")
	}

	cg := cfg.Cgroups
	if cg.Path != "/agentnode/test" || cg.Systemd {
		t.Errorf("cgroup path %q systemd %v", cg.Path, cg.Systemd)
	}
	if r := cg.Resources; r.Memory != 512<<20 || r.MemorySwap != 512<<20 || r.PidsLimit == nil || *r.PidsLimit != 256 ||
		r.CpuQuota != 100000 || r.CpuPeriod != 100000 {
		t.Errorf("cgroup resources memory %d swap %d pids %s cpu %d/%d", r.Memory, r.MemorySwap, jsonOf(r.PidsLimit), r.CpuQuota, r.CpuPeriod)
	}
	if d := cg.Resources.Devices; len(d) == 0 || d[0].Allow || d[0].Type != 'a' {
		t.Errorf("device rules do not start with deny-all: %+v", d)
	}

	for _, p := range []string{"/proc/kcore", "/proc/sysrq-trigger", "/sys/firmware", "/proc/keys"} {
		if !slices.Contains(cfg.MaskPaths, p) {
			t.Errorf("MaskPaths lacks %s", p)
		}
	}
	if !slices.Contains(cfg.ReadonlyPaths, "/proc/sys") {
		t.Error("ReadonlyPaths lacks /proc/sys")
	}

	mounts := map[string]*configs.Mount{}
	for _, m := range cfg.Mounts {
		mounts[m.Destination] = m
	}
	for dest, flags := range map[string]int{
		"/tmp":           unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC,
		HomeDir:          unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC,
		"/dev/shm":       unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC,
		"/proc":          unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC,
		"/sys":           unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_RDONLY,
		PackDir:          unix.MS_BIND | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV,
		"/dev":           unix.MS_NOSUID | unix.MS_NOEXEC,
		"/dev/mqueue":    unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC,
		"/sys/fs/cgroup": unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_RDONLY,
	} {
		m, ok := mounts[dest]
		if !ok {
			t.Errorf("mount %s missing", dest)
			continue
		}
		if m.Flags&flags != flags {
			t.Errorf("mount %s flags %#x lack %#x", dest, m.Flags, flags)
		}
		if m.Flags&unix.MS_REC != 0 {
			t.Errorf("mount %s is recursive", dest)
		}
	}
	if m := mounts[PackDir]; m != nil && m.Source != pack {
		t.Errorf("/pack source %q", m.Source)
	}
	if m := mounts[HomeDir]; m != nil && m.Data != "mode=700,uid=1000,gid=1000,size=16m" {
		t.Errorf("home tmpfs data %q", m.Data)
	}

	// libcontainer's own validator, as container creation runs it.
	if err := validate.Validate(cfg); err != nil {
		t.Errorf("validate: %v", err)
	}
}
