package main

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// testImageID is the image testSpec's runs run (Run resolves it in the
// image store).
var testImageID = "sha256:" + strings.Repeat("2", 64)

func testSpec() sandbox.Spec {
	return sandbox.Spec{
		RunID:      "run-1",
		Image:      "agentnode/sandbox@sha256:" + strings.Repeat("1", 64),
		ImageStore: "/var/lib/agentnode/images", // Docker runs the image, not its rootfs
		PackageDir: "/opt/pkg",
		Args:       []string{"/pack/tool", "--flag", "x"},
		Env:        []string{"FOO=bar"},
	}
}

// TestContainerConfig pins the mapping of the profile onto the Engine API
// (AgentNode's flags and this profile's additions).
func TestContainerConfig(t *testing.T) {
	cs, err := containerConfig(testSpec(), testImageID, "me")
	if err != nil {
		t.Fatal(err)
	}
	c, h := cs.config, cs.host
	if cs.name != "agentnode-run-1" || c.Labels[runLabel] != "run-1" || c.Labels[ownerLabel] != "me" {
		t.Errorf("name %q labels %v", cs.name, c.Labels)
	}
	if c.Image != "sha256:"+strings.Repeat("2", 64) {
		t.Errorf("image %q: the image ID must be what runs", c.Image)
	}
	if !slices.Equal(c.Entrypoint, []string{"/pack/tool"}) || !slices.Equal(c.Cmd, []string{"--flag", "x"}) {
		t.Errorf("argv %q %q", c.Entrypoint, c.Cmd)
	}
	if c.User != "1000:1000" || c.WorkingDir != "/tmp" || c.Hostname != "sandbox" || c.Tty ||
		!c.AttachStdin || !c.OpenStdin || !c.StdinOnce || !c.AttachStdout || !c.AttachStderr {
		t.Errorf("config %+v", c)
	}
	if !slices.Equal(c.Env, []string{"PATH=/bin:/usr/bin", "HOME=" + profile.HomeDir, "FOO=bar"}) {
		t.Errorf("env %q", c.Env)
	}
	if !h.ReadonlyRootfs || h.Privileged || !slices.Equal(h.CapDrop, []string{"ALL"}) || len(h.CapAdd) != 0 {
		t.Errorf("rootfs/privileges: %+v", h)
	}
	if len(h.SecurityOpt) != 2 || h.SecurityOpt[0] != "no-new-privileges" || h.SecurityOpt[1] != "seccomp="+string(profile.SeccompDockerJSON()) {
		t.Errorf("security options %d: %.80q", len(h.SecurityOpt), h.SecurityOpt)
	}
	if h.NetworkMode != "none" || h.IpcMode != container.IPCModePrivate || h.CgroupnsMode != container.CgroupnsModePrivate ||
		h.PidMode != "" || h.UTSMode != "" || h.UsernsMode != "" {
		t.Errorf("namespaces: net %q ipc %q cgroupns %q pid %q uts %q userns %q", h.NetworkMode, h.IpcMode, h.CgroupnsMode, h.PidMode, h.UTSMode, h.UsernsMode)
	}
	if h.Init == nil || *h.Init || h.AutoRemove || h.LogConfig.Type != "none" || h.RestartPolicy.Name != container.RestartPolicyDisabled {
		t.Errorf("init %v autoremove %v log %q restart %q", h.Init, h.AutoRemove, h.LogConfig.Type, h.RestartPolicy.Name)
	}
	wantTmpfs := map[string]string{
		"/tmp":          "nosuid,nodev,noexec,mode=1777,size=64m",
		"/sandbox-home": "nosuid,nodev,noexec,mode=700,uid=1000,gid=1000,size=16m",
	}
	if len(h.Tmpfs) != len(wantTmpfs) {
		t.Errorf("tmpfs %v", h.Tmpfs)
	}
	for k, v := range wantTmpfs {
		if h.Tmpfs[k] != v {
			t.Errorf("tmpfs %s = %q, want %q", k, h.Tmpfs[k], v)
		}
	}
	if h.ShmSize != 16<<20 {
		t.Errorf("shm size %d", h.ShmSize)
	}
	want := mount.Mount{Type: mount.TypeBind, Source: "/opt/pkg", Target: "/pack", ReadOnly: true,
		BindOptions: &mount.BindOptions{NonRecursive: true, Propagation: mount.PropagationRPrivate}}
	if len(h.Mounts) != 1 || h.Mounts[0].Type != want.Type || h.Mounts[0].Source != want.Source || h.Mounts[0].Target != want.Target ||
		!h.Mounts[0].ReadOnly || *h.Mounts[0].BindOptions != *want.BindOptions || len(h.Binds) != 0 {
		t.Errorf("mounts %+v binds %v", h.Mounts, h.Binds)
	}
	if h.Memory != 512<<20 || h.MemorySwap != 512<<20 || h.PidsLimit == nil || *h.PidsLimit != 256 || h.NanoCPUs != 1e9 ||
		h.OomKillDisable == nil || *h.OomKillDisable {
		t.Errorf("limits: memory %d swap %d pids %v nanocpus %d", h.Memory, h.MemorySwap, h.PidsLimit, h.NanoCPUs)
	}
	ul := map[string][2]int64{}
	for _, u := range h.Ulimits {
		ul[u.Name] = [2]int64{u.Soft, u.Hard}
	}
	if ul["nofile"] != [2]int64{1024, 1024} || ul["core"] != [2]int64{0, 0} || ul["nproc"][1] == 0 ||
		ul["fsize"] != [2]int64{1 << 30, 1 << 30} || len(ul) != 4 {
		t.Errorf("ulimits %v", ul)
	}
	base, err := profile.Base()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.MaskedPaths, base.Linux.MaskedPaths) || !slices.Equal(h.ReadonlyPaths, base.Linux.ReadonlyPaths) || len(h.MaskedPaths) == 0 {
		t.Errorf("masked %v readonly %v", h.MaskedPaths, h.ReadonlyPaths)
	}
	if len(h.Devices)+len(h.DeviceCgroupRules)+len(h.VolumesFrom)+len(h.Sysctls) != 0 || h.Runtime != "" {
		t.Errorf("extras: %+v", h)
	}
}

func TestContainerConfigLimits(t *testing.T) {
	s := testSpec()
	s.Limits = sandbox.Limits{MemoryBytes: 64 << 20, Pids: 32, CPUs: 0.5, TmpBytes: 8 << 20}
	cs, err := containerConfig(s, testImageID, "")
	if err != nil {
		t.Fatal(err)
	}
	h := cs.host
	if h.Memory != 64<<20 || h.MemorySwap != 64<<20 || *h.PidsLimit != 32 || h.NanoCPUs != 5e8 ||
		h.Tmpfs["/tmp"] != "nosuid,nodev,noexec,mode=1777,size=8388608" {
		t.Errorf("memory %d swap %d pids %d nanocpus %d tmp %q", h.Memory, h.MemorySwap, *h.PidsLimit, h.NanoCPUs, h.Tmpfs["/tmp"])
	}
	if _, ok := cs.config.Labels[ownerLabel]; ok {
		t.Error("owner label without an owner")
	}
	for name, mutate := range map[string]func(*sandbox.Spec){
		"no package dir": func(s *sandbox.Spec) { s.PackageDir = "" },
		"root package":   func(s *sandbox.Spec) { s.PackageDir = "/" },
		"empty argv0":    func(s *sandbox.Spec) { s.Args = []string{""} },
		"PATH override":  func(s *sandbox.Spec) { s.Env = []string{"PATH=/evil"} },
		"tiny memory":    func(s *sandbox.Spec) { s.Limits.MemoryBytes = 1 << 20 },
		"negative pids":  func(s *sandbox.Spec) { s.Limits.Pids = -1 },
		"no image":       func(s *sandbox.Spec) { s.Image = "" },
		"no image store": func(s *sandbox.Spec) { s.ImageStore = "" },
	} {
		s := testSpec()
		mutate(&s)
		if _, err := containerConfig(s, testImageID, ""); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, id := range []string{"", "busybox:latest", testSpec().Image} {
		if _, err := containerConfig(testSpec(), id, ""); err == nil {
			t.Errorf("image id %q: accepted", id)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, id := range []string{"a", "an-0123", "x.y_z", strings.Repeat("a", maxRunIDLen)} {
		if err := validateRunID(id); err != nil {
			t.Errorf("validateRunID(%q): %v", id, err)
		}
	}
	for _, id := range []string{"", "-a", ".a", "a/b", "a b", "a:b", strings.Repeat("a", maxRunIDLen+1), "ä"} {
		if validateRunID(id) == nil {
			t.Errorf("validateRunID(%q) accepted", id)
		}
	}
	if err := validateImageID("sha256:" + strings.Repeat("f", 64)); err != nil {
		t.Error(err)
	}
	for _, id := range []string{"", "busybox", "sha256:" + strings.Repeat("F", 64), "sha256:abc", "x@sha256:" + strings.Repeat("f", 64), "sha512:" + strings.Repeat("f", 64)} {
		if validateImageID(id) == nil {
			t.Errorf("validateImageID(%q) accepted", id)
		}
	}
}

// TestContainerConfigWorkspace: the workspace is a local-driver volume
// binding the directory read-only at its own path with noexec, nosuid,
// nodev (a Docker bind mount cannot have them), and the working directory;
// a writable one is refused.
func TestContainerConfigWorkspace(t *testing.T) {
	s := testSpec()
	s.Workspace = &sandbox.Workspace{Path: "/home/u/project"}
	cs, err := containerConfig(s, testImageID, "me")
	if err != nil {
		t.Fatal(err)
	}
	if cs.config.WorkingDir != "/home/u/project" {
		t.Errorf("working dir %q", cs.config.WorkingDir)
	}
	i := slices.IndexFunc(cs.host.Mounts, func(m mount.Mount) bool { return m.Target == "/home/u/project" })
	if i < 0 {
		t.Fatalf("no workspace mount in %+v", cs.host.Mounts)
	}
	m := cs.host.Mounts[i]
	want := map[string]string{"type": "none", "device": "/home/u/project", "o": "bind,nosuid,nodev,noexec,ro"}
	if m.Type != mount.TypeVolume || m.ReadOnly || m.VolumeOptions == nil || m.VolumeOptions.DriverConfig == nil ||
		m.VolumeOptions.DriverConfig.Name != "local" || !maps.Equal(m.VolumeOptions.DriverConfig.Options, want) {
		t.Errorf("workspace mount %+v (%+v)", m, m.VolumeOptions)
	}
	// Writable: refused (Docker's driver would leave it executable).
	s.Workspace.Writable = true
	if _, err := containerConfig(s, testImageID, "me"); err == nil || !strings.Contains(err.Error(), "noexec") {
		t.Errorf("a writable workspace on Docker: %v, want a refusal", err)
	}
}
