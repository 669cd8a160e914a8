package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

const testImage = "agentnode/sandbox@sha256:1111111111111111111111111111111111111111111111111111111111111111"

func testRun() sandbox.Spec {
	return sandbox.Spec{
		RunID:      "r1",
		Image:      testImage,
		ImageStore: "/var/lib/agentnode/images",
		PackageDir: "/var/lib/agentnode/packs/p1",
		Args:       []string{"/bin/sh", "/pack/tool.sh"},
		Env:        []string{"GREETING=hi"},
		Limits:     sandbox.Limits{MemoryBytes: 128 << 20, CPUs: 0.5, TmpBytes: 8 << 20, Pids: 64},
	}
}

// TestPodForFollowsTheProfile checks the Pod against the OCI spec the
// other backends run for the same Spec, field by field.
func TestPodForFollowsTheProfile(t *testing.T) {
	run := testRun()
	want, err := profile.ForRun(run)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := PodFor(run, PodOptions{Name: "agentnode-r1", Owner: "host-a", RuntimeClass: "gvisor", NodeSelector: map[string]string{"pool": "sandbox"}})
	if err != nil {
		t.Fatal(err)
	}
	p := tr.Pod.Spec
	c := p.Containers[0]
	if len(p.Containers) != 1 || len(p.InitContainers) != 0 || len(p.EphemeralContainers) != 0 {
		t.Fatalf("containers: %+v", p)
	}
	if tr.Pod.Name != "agentnode-r1" || tr.Pod.Labels[OwnerLabel] != "host-a" {
		t.Errorf("metadata %+v", tr.Pod.ObjectMeta)
	}
	if c.Image != testImage || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("image %q pull %q", c.Image, c.ImagePullPolicy)
	}
	if !slices.Equal(c.Command, want.Process.Args) || len(c.Args) != 0 {
		t.Errorf("command %q args %q, want %q", c.Command, c.Args, want.Process.Args)
	}
	var env []string
	for _, e := range c.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	if !slices.Equal(env, want.Process.Env) || !slices.Contains(env, "GREETING=hi") {
		t.Errorf("env %q, want %q", env, want.Process.Env)
	}
	if c.WorkingDir != want.Process.Cwd {
		t.Errorf("workingDir %q, want %q", c.WorkingDir, want.Process.Cwd)
	}

	sc, psc := c.SecurityContext, p.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot ||
		psc.RunAsUser == nil || *psc.RunAsUser != int64(want.Process.User.UID) || *psc.RunAsUser != 1000 ||
		psc.RunAsGroup == nil || *psc.RunAsGroup != int64(want.Process.User.GID) || *psc.RunAsGroup != 1000 {
		t.Errorf("pod security context %+v", psc)
	}
	if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccomp %+v", psc.SeccompProfile)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Privileged == nil || *sc.Privileged ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("container security context %+v", sc)
	}
	if p.AutomountServiceAccountToken == nil || *p.AutomountServiceAccountToken ||
		p.EnableServiceLinks == nil || *p.EnableServiceLinks || p.HostNetwork || p.HostPID || p.HostIPC {
		t.Errorf("pod spec %+v", p)
	}
	if p.RestartPolicy != corev1.RestartPolicyNever || p.TerminationGracePeriodSeconds == nil || *p.TerminationGracePeriodSeconds != 0 {
		t.Errorf("restart %q grace %v", p.RestartPolicy, p.TerminationGracePeriodSeconds)
	}
	if p.RuntimeClassName == nil || *p.RuntimeClassName != "gvisor" || p.NodeSelector["pool"] != "sandbox" {
		t.Errorf("runtime class %v node selector %v", p.RuntimeClassName, p.NodeSelector)
	}

	// limits: the run's (128 MiB, 0.5 CPU), requests equal to them
	mem, cpu := c.Resources.Limits[corev1.ResourceMemory], c.Resources.Limits[corev1.ResourceCPU]
	if mem.Value() != *want.Linux.Resources.Memory.Limit || mem.Value() != 128<<20 {
		t.Errorf("memory limit %v", mem.String())
	}
	if cpu.MilliValue() != 500 {
		t.Errorf("cpu limit %v", cpu.String())
	}
	if !c.Resources.Requests[corev1.ResourceMemory].Equal(mem) || !c.Resources.Requests[corev1.ResourceCPU].Equal(cpu) {
		t.Errorf("requests %v differ from limits %v", c.Resources.Requests, c.Resources.Limits)
	}

	// every writable tmpfs of the profile (not /dev's) is a memory emptyDir
	// of its size at its path
	sizes := map[string]int64{}
	for _, m := range c.VolumeMounts {
		for _, v := range p.Volumes {
			if v.Name == m.Name {
				if v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory || v.EmptyDir.SizeLimit == nil {
					t.Fatalf("volume %s: %+v", v.Name, v.VolumeSource)
				}
				sizes[m.MountPath] = v.EmptyDir.SizeLimit.Value()
			}
		}
		if m.ReadOnly {
			t.Errorf("tmpfs %s mounted read-only", m.MountPath)
		}
	}
	home := ""
	for _, e := range want.Process.Env {
		if v, ok := strings.CutPrefix(e, "HOME="); ok {
			home = v
		}
	}
	if len(sizes) != 2 || sizes["/tmp"] != 8<<20 || sizes[home] != 16<<20 {
		t.Errorf("tmpfs emptyDirs %v, want /tmp 8 MiB and %s 16 MiB", sizes, home)
	}
	if len(p.Volumes) != len(c.VolumeMounts) {
		t.Errorf("volumes %d, mounts %d", len(p.Volumes), len(c.VolumeMounts))
	}

	unenforced := strings.Join(tr.Unenforced, "\n")
	for _, w := range []string{"pids limit 64", "rlimits", "noexec", "seccomp"} {
		if !strings.Contains(unenforced, w) {
			t.Errorf("unenforced %q lacks %q", tr.Unenforced, w)
		}
	}
	if len(tr.Unenforced) != 4 {
		t.Errorf("unenforced %q: want 4 entries", tr.Unenforced)
	}
}

func TestPodForLocalhostSeccomp(t *testing.T) {
	tr, err := PodFor(testRun(), PodOptions{Name: "p", LocalhostSeccomp: "agentnode.json"})
	if err != nil {
		t.Fatal(err)
	}
	sp := tr.Pod.Spec.SecurityContext.SeccompProfile
	if sp.Type != corev1.SeccompProfileTypeLocalhost || sp.LocalhostProfile == nil || *sp.LocalhostProfile != "agentnode.json" {
		t.Errorf("seccomp %+v", sp)
	}
	for _, u := range tr.Unenforced {
		if strings.Contains(u, "seccomp") {
			t.Errorf("unenforced %q with the profile's own seccomp", u)
		}
	}
}

func TestPodForRefuses(t *testing.T) {
	for name, mod := range map[string]func(*sandbox.Spec){
		"workspace": func(s *sandbox.Spec) { s.Workspace = &sandbox.Workspace{Path: "/home/u/w"} },
		"egress":    func(s *sandbox.Spec) { s.EgressSocket = "/run/agentnode/egress.sock" },
		"gvisor":    func(s *sandbox.Spec) { s.Runtime = sandbox.RuntimeGVisor },
	} {
		run := testRun()
		mod(&run)
		if _, err := PodFor(run, PodOptions{Name: "p"}); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", name, err)
		}
	}
	for name, mod := range map[string]func(*sandbox.Spec){
		"no args":         func(s *sandbox.Spec) { s.Args = nil },
		"tag image":       func(s *sandbox.Spec) { s.Image = "agentnode/sandbox:latest" },
		"negative memory": func(s *sandbox.Spec) { s.Limits.MemoryBytes = -1 },
	} {
		run := testRun()
		mod(&run)
		if tr, err := PodFor(run, PodOptions{Name: "p"}); err == nil {
			t.Errorf("%s: translated to %+v", name, tr.Pod)
		}
	}
}
