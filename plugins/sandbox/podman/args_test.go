package main

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

const testImageHex = "108cfe9164e79263b959d4b679593dd13a3b16985f7c1f5231b7c50cdbd28e2c"

func testParams() runParams {
	return runParams{
		runID: "run-1", nonce: "n0nce", owner: "42:4242", imageID: testImageHex,
		cidfile: "/run/x/cid", seccompFile: "/run/x/seccomp.json", cgroupParent: DefaultCgroupParent, backstop: 35,
	}
}

func testSpec(t *testing.T, mod func(*sandbox.Spec)) *specs.Spec {
	t.Helper()
	run := sandbox.Spec{
		RunID: "run-1", Image: "agentnode/sandbox@sha256:" + testImageHex, ImageStore: "/var/lib/agentnode/images", PackageDir: "/srv/pack",
		Args: []string{"/pack/tool", "--flag", "a b", `["x"]`}, Env: []string{"FOO=bar", "MULTI=a,b c"},
		Limits: sandbox.Limits{MemoryBytes: 64 << 20, Pids: 100, CPUs: 0.5, TmpBytes: 8 << 20},
	}
	if mod != nil {
		mod(&run)
	}
	s, err := profile.ForRun(run)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// flagValues returns every value of flag in args (before the image).
func flagValues(args []string, flag string) []string {
	var out []string
	for i := 0; i < len(args)-1; i++ {
		if args[i] == testImageHex {
			break
		}
		if args[i] == flag {
			out = append(out, args[i+1])
		}
	}
	return out
}

func TestRunArgsMapsTheProfile(t *testing.T) {
	args, err := runArgs(testSpec(t, nil), testParams())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{
		"run", "--rm=false", "--interactive", "--read-only", "--read-only-tmpfs=false", "--cap-drop=ALL",
		"--passwd=false", "--systemd=false", "--env-host=false", "--http-proxy=false", "--no-healthcheck",
		"--no-hosts", "--unsetenv-all",
	} {
		if !slices.Contains(args, f) {
			t.Errorf("missing %s in %q", f, args)
		}
	}
	want := map[string][]string{
		"--name":          {"agentnode-run-1"},
		"--label":         {"agentnode.run=run-1", "agentnode.nonce=n0nce", "agentnode.owner=42:4242"},
		"--cidfile":       {"/run/x/cid"},
		"--log-driver":    {"passthrough"},
		"--pull":          {"never"},
		"--network":       {"none"},
		"--userns":        {"host"},
		"--pid":           {"private"},
		"--ipc":           {"private"},
		"--uts":           {"private"},
		"--cgroupns":      {"private"},
		"--cgroups":       {"no-conmon"},
		"--cgroup-parent": {DefaultCgroupParent},
		"--image-volume":  {"ignore"},
		"--user":          {"1000:1000"},
		"--hostname":      {"sandbox"},
		"--workdir":       {"/tmp"},
		"--timeout":       {"35"},
		"--memory":        {"67108864"},
		"--memory-swap":   {"67108864"},
		"--pids-limit":    {"100"},
		"--cpu-period":    {"100000"},
		"--cpu-quota":     {"50000"},
		"--shm-size":      {"16m"},
		"--ulimit":        {"nofile=1024:1024", "nproc=4096:4096", "core=0:0", "fsize=1073741824:1073741824"},
		"--security-opt": {"no-new-privileges", "seccomp=/run/x/seccomp.json",
			"mask=/proc/acpi:/proc/asound:/proc/interrupts:/proc/kallsyms:/proc/kcore:/proc/keys:/proc/latency_stats:/proc/sched_debug:/proc/scsi:/proc/sysrq-trigger:/proc/timer_list:/proc/timer_stats:/sys/devices/virtual/powercap:/sys/firmware"},
		"--tmpfs": {"/tmp:rw,nosuid,nodev,noexec,mode=1777,size=8388608,notmpcopyup,U",
			"/sandbox-home:rw,nosuid,nodev,noexec,mode=700,size=16m,notmpcopyup,U"},
		"--volume":     {"/srv/pack:/pack:bind,ro,nosuid,nodev"},
		"--env":        {"PATH=/bin:/usr/bin", "HOME=/sandbox-home", "FOO=bar", "MULTI=a,b c"},
		"--entrypoint": {`["/pack/tool"]`},
	}
	for flag, vals := range want {
		if got := flagValues(args, flag); !slices.Equal(got, vals) {
			t.Errorf("%s = %q, want %q", flag, got, vals)
		}
	}
	// The image ID, then the rest of argv verbatim, at the end.
	i := slices.Index(args, testImageHex)
	if i < 0 || !slices.Equal(args[i+1:], []string{"--flag", "a b", `["x"]`}) {
		t.Errorf("image and argv: %q", args[max(i, 0):])
	}
	for _, a := range args {
		if strings.HasPrefix(a, "--privileged") || strings.HasPrefix(a, "--cap-add") || strings.HasPrefix(a, "--device") {
			t.Errorf("unexpected %s", a)
		}
	}

	// --rm only when asked for, and exactly one of the two.
	p := testParams()
	p.autoRemove = true
	args, err = runArgs(testSpec(t, nil), p)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(args, "--rm=true") || slices.Contains(args, "--rm=false") {
		t.Errorf("autoRemove: %q", args)
	}

	// The memory limits on the run's cgroup: none for the container, the
	// other limits as before.
	p = testParams()
	p.memoryOnParent = true
	if args, err = runArgs(testSpec(t, nil), p); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(args, "--memory") || slices.Contains(args, "--memory-swap") || !slices.Contains(args, "--pids-limit") || !slices.Contains(args, "--cpu-quota") {
		t.Errorf("memoryOnParent: %q", args)
	}
	// ... but still checked.
	bad := testSpec(t, nil)
	*bad.Linux.Resources.Memory.Swap = *bad.Linux.Resources.Memory.Limit - 1
	if _, err := runArgs(bad, p); err == nil {
		t.Error("memoryOnParent: memory+swap below memory was accepted")
	}
}

func TestRunArgsRefuses(t *testing.T) {
	cases := map[string]struct {
		spec func(*specs.Spec)
		p    func(*runParams)
		run  func(*sandbox.Spec)
	}{
		"colon in PackageDir":   {run: func(r *sandbox.Spec) { r.PackageDir = "/srv/a:b" }},
		"comma in PackageDir":   {run: func(r *sandbox.Spec) { r.PackageDir = "/srv/a,b" }},
		"bad run id":            {p: func(p *runParams) { p.runID = "../x" }},
		"bad image id":          {p: func(p *runParams) { p.imageID = "busybox" }},
		"terminal":              {spec: func(s *specs.Spec) { s.Process.Terminal = true }},
		"root":                  {spec: func(s *specs.Spec) { s.Process.User.UID = 0 }},
		"extra groups":          {spec: func(s *specs.Spec) { s.Process.User.AdditionalGids = []uint32{0} }},
		"no nnp":                {spec: func(s *specs.Spec) { s.Process.NoNewPrivileges = false }},
		"a capability":          {spec: func(s *specs.Spec) { s.Process.Capabilities.Bounding = []string{"CAP_KILL"} }},
		"no capabilities field": {spec: func(s *specs.Spec) { s.Process.Capabilities = nil }},
		"writable root":         {spec: func(s *specs.Spec) { s.Root.Readonly = false }},
		"no seccomp":            {spec: func(s *specs.Spec) { s.Linux.Seccomp = nil }},
		"user namespace": {spec: func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
		}},
		"joined namespace": {spec: func(s *specs.Spec) { s.Linux.Namespaces[0].Path = "/proc/1/ns/pid" }},
		"no pid namespace": {spec: func(s *specs.Spec) { s.Linux.Namespaces = s.Linux.Namespaces[1:] }},
		"unknown mount": {spec: func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/data", Type: "bind", Source: "/data"})
		}},
		"exec tmpfs": {spec: func(s *specs.Spec) {
			for i := range s.Mounts {
				if s.Mounts[i].Destination == "/tmp" {
					s.Mounts[i].Options = slices.DeleteFunc(s.Mounts[i].Options, func(o string) bool { return o == "noexec" })
				}
			}
		}},
		"foreign tmpfs owner": {spec: func(s *specs.Spec) {
			for i := range s.Mounts {
				if s.Mounts[i].Destination == profile.HomeDir {
					s.Mounts[i].Options = append(s.Mounts[i].Options, "uid=0")
				}
			}
		}},
		"writable pack": {spec: func(s *specs.Spec) {
			for i := range s.Mounts {
				if s.Mounts[i].Destination == profile.PackDir {
					s.Mounts[i].Options = []string{"bind"}
				}
			}
		}},
		"recursive pack": {spec: func(s *specs.Spec) {
			for i := range s.Mounts {
				if s.Mounts[i].Destination == profile.PackDir {
					s.Mounts[i].Options = []string{"rbind", "bind", "ro"}
				}
			}
		}},
		"no pids limit":   {spec: func(s *specs.Spec) { s.Linux.Resources.Pids = nil }},
		"swap above mem":  {spec: func(s *specs.Spec) { *s.Linux.Resources.Memory.Swap = *s.Linux.Resources.Memory.Limit - 1 }},
		"device allowed":  {spec: func(s *specs.Spec) { s.Linux.Resources.Devices[0].Allow = true }},
		"sysctl":          {spec: func(s *specs.Spec) { s.Linux.Sysctl = map[string]string{"kernel.x": "1"} }},
		"hooks":           {spec: func(s *specs.Spec) { s.Hooks = &specs.Hooks{} }},
		"bad rlimit":      {spec: func(s *specs.Spec) { s.Process.Rlimits[0].Type = "NOFILE" }},
		"incomplete spec": {spec: func(s *specs.Spec) { s.Linux = nil }},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if c.run != nil {
				// ForRun may refuse it already; then so does the backend.
				run := sandbox.Spec{RunID: "r", Image: "agentnode/sandbox@sha256:" + testImageHex, ImageStore: "/var/lib/agentnode/images", PackageDir: "/srv/pack", Args: []string{"/pack/x"}}
				c.run(&run)
				s, err := profile.ForRun(run)
				if err != nil {
					return
				}
				if _, err := runArgs(s, testParams()); err == nil {
					t.Fatal("runArgs accepted it")
				}
				return
			}
			s := testSpec(t, nil)
			p := testParams()
			if c.spec != nil {
				c.spec(s)
			}
			if c.p != nil {
				c.p(&p)
			}
			if args, err := runArgs(s, p); err == nil {
				t.Fatalf("runArgs accepted it: %q", args)
			}
		})
	}
}

func TestParseImageID(t *testing.T) {
	if h, err := parseImageID("sha256:" + testImageHex); err != nil || h != testImageHex {
		t.Fatalf("parseImageID = %q, %v", h, err)
	}
	for _, bad := range []string{"", "sha256:", "sha256:abc", "sha512:" + testImageHex, strings.ToUpper(testImageHex), "busybox:latest", "sha256:" + testImageHex + "0"} {
		if _, err := parseImageID(bad); err == nil {
			t.Errorf("parseImageID(%q) accepted", bad)
		}
	}
}

func TestParseVersion(t *testing.T) {
	cases := []struct {
		out, prefix string
		want        semver
		ok          bool
	}{
		{"podman version 4.3.1\n", "podman version ", semver{4, 3}, true},
		{"runc version 1.1.5+ds1\ncommit: x\nspec: 1.0.2-dev\n", "runc version ", semver{1, 1}, true},
		{"runc version 1.5.3\n", "runc version ", semver{1, 5}, true},
		{"podman version dev\n", "podman version ", semver{}, false},
		{"", "podman version ", semver{}, false},
	}
	for _, c := range cases {
		got, err := parseVersion([]byte(c.out), c.prefix)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseVersion(%q) = %v, %v", c.out, got, err)
		}
	}
	if !(semver{3, 4}).less(minPodman) || (semver{4, 3}).less(minPodman) || (semver{5, 0}).less(minPodman) {
		t.Error("semver.less")
	}
}

func TestRunIDs(t *testing.T) {
	for _, ok := range []string{"a", "an-0123", "sandboxtest-exit-code-12-1", "A.b_c-1"} {
		if !runIDRE.MatchString(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "-a", ".a", "a/b", "a b", "a:b", strings.Repeat("a", 129), "a\n"} {
		if runIDRE.MatchString(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestAlive(t *testing.T) {
	self, err := processID(1)
	if err != nil {
		t.Skip(err)
	}
	if !alive(self) {
		t.Errorf("pid 1 (%s) not alive", self)
	}
	pid, start, _ := strings.Cut(self, ":")
	for _, dead := range []string{pid + ":" + start + "1", "0:1", "x", "", "99999999:1"} {
		if alive(dead) {
			t.Errorf("%q alive", dead)
		}
	}
}

// TestCgroupMountsOf reads a mount table as the kernel writes it (octal
// escapes in paths, optional fields, v1 and v2 hierarchies, one bind-mounted
// below its root) through github.com/moby/sys/mountinfo.
func TestCgroupMountsOf(t *testing.T) {
	table := `25 30 0:22 / /sys rw,nosuid shared:7 - sysfs sysfs rw
31 25 0:27 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate
33 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:14 - cgroup cgroup rw,cpu,cpuacct
34 25 0:30 / /sys/fs/cgroup/sys\040temd rw,nosuid shared:15 - cgroup cgroup rw,name=systemd
35 25 0:29 /libpod_parent /mnt/cg rw shared:16 - cgroup cgroup rw,cpu,cpuacct
40 30 0:40 / /var/lib/containers/overlay/abc123/merged rw - overlay overlay rw,lowerdir=/l
`
	mounts, err := mountinfo.GetMountsFromReader(strings.NewReader(table), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := cgroupMountsOf(mounts)
	want := []cgroupMount{
		{point: "/sys/fs/cgroup/unified", v2: true},
		{point: "/sys/fs/cgroup/cpu,cpuacct", controllers: []string{"cpu", "cpuacct"}},
		{point: "/sys/fs/cgroup/sys temd", controllers: []string{"name=systemd"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cgroupMountsOf = %+v, want %+v", got, want)
	}
	if !mountNaming(mounts, "abc123") || mountNaming(mounts, "def456") {
		t.Error("mountNaming does not find the container's mount (or finds another)")
	}
}

// TestRunArgsWorkspace: the workspace is a volume at its own path with the
// profile's options (noexec, nosuid, nodev, ro unless writable) and the
// working directory.
func TestRunArgsWorkspace(t *testing.T) {
	for _, w := range []struct {
		writable bool
		mode     string
	}{{false, "ro"}, {true, "rw"}} {
		args, err := runArgs(testSpec(t, func(r *sandbox.Spec) {
			r.Workspace = &sandbox.Workspace{Path: "/home/u/project", Writable: w.writable}
		}), testParams())
		if err != nil {
			t.Fatal(err)
		}
		want := "/home/u/project:/home/u/project:bind,nosuid,nodev,noexec," + w.mode
		if i := slices.Index(args, want); i < 1 || args[i-1] != "--volume" {
			t.Errorf("no --volume %s in %q", want, args)
		}
		if i := slices.Index(args, "--workdir"); i < 0 || args[i+1] != "/home/u/project" {
			t.Errorf("workdir not the workspace in %q", args)
		}
	}
}
