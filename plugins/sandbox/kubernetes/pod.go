// This file translates one run's sandbox.Spec into the Pod that runs it, from
// the same profile the other backends run (sdk/sandbox/profile.ForRun), so
// that a pod is hardened exactly as a local sandbox is. The package's volume,
// the start gate and the labels are added by run.go.

package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// ErrUnsupported is wrapped by PodFor's errors about a run this backend
// cannot run yet: it refuses it rather than run it with less isolation.
var ErrUnsupported = errors.New("not supported by the kubernetes backend")

// noexecNote is reported for the profile's noexec tmpfs mounts: an
// emptyDir takes no mount options.
const noexecNote = "noexec on the tmpfs mounts (an emptyDir has no mount options)"

// ContainerName is the name of the pod's one container.
const ContainerName = "tool"

// OwnerLabel marks the pods of this host's agentnode (their reaping).
const OwnerLabel = "agentnode.dev/owner"

// PodOptions are the cluster's side of the translation (sandbox.kubernetes.*).
type PodOptions struct {
	Name             string            // the pod's name
	Owner            string            // OwnerLabel's value
	RuntimeClass     string            // runtimeClassName, empty for none
	NodeSelector     map[string]string // nodeSelector
	LocalhostSeccomp string            // the node's path of agentnode's seccomp profile; empty: RuntimeDefault
}

// Translation is a run's Pod and what of the profile it does not enforce.
type Translation struct {
	Pod *corev1.Pod
	// Unenforced names what of the profile a pod cannot carry (the
	// backend reports it): the per-run pids limit (Kubernetes has only
	// the kubelet's podPidsLimit), the rlimits, noexec on the tmpfs
	// mounts and, with RuntimeDefault, the profile's own seccomp filter.
	Unenforced []string
}

// PodFor translates run into its Pod: the profile's user (runAsNonRoot),
// argv, environment and working directory; a read-only root filesystem,
// every capability dropped, no privilege escalation, seccomp; the
// profile's memory and CPU limits as limits and requests; each of its
// writable tmpfs mounts (/tmp, HOME) as a memory-backed emptyDir of the
// same size; no service account token, no service links, no host
// namespaces; the image by digest, never pulled.
func PodFor(run sandbox.Spec, opts PodOptions) (*Translation, error) {
	if run.Workspace != nil {
		return nil, fmt.Errorf("kubernetes: Workspace: %w", ErrUnsupported)
	}
	if run.EgressSocket != "" {
		return nil, fmt.Errorf("kubernetes: EgressSocket: %w", ErrUnsupported)
	}
	if run.Runtime != "" && run.Runtime != sandbox.RuntimeNative {
		return nil, fmt.Errorf("kubernetes: Runtime %q: %w (a RuntimeClass is the cluster's choice)", run.Runtime, ErrUnsupported)
	}
	s, err := profile.ForRun(run)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	if s.Process == nil || s.Linux == nil || s.Linux.Resources == nil {
		return nil, errors.New("kubernetes: the profile has no process or resources")
	}
	uid, gid := int64(s.Process.User.UID), int64(s.Process.User.GID)
	if uid == 0 || gid == 0 {
		return nil, errors.New("kubernetes: the profile's user is root")
	}
	no, yes := false, true
	t := &Translation{}

	env := make([]corev1.EnvVar, 0, len(s.Process.Env))
	for _, kv := range s.Process.Env {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}

	res, err := resources(s.Linux.Resources)
	if err != nil {
		return nil, err
	}
	if p := s.Linux.Resources.Pids; p != nil && p.Limit != nil && *p.Limit > 0 {
		t.Unenforced = append(t.Unenforced, "pids limit "+strconv.FormatInt(*p.Limit, 10)+" (the kubelet's podPidsLimit applies)")
	}

	if len(s.Process.Rlimits) > 0 {
		t.Unenforced = append(t.Unenforced, "rlimits (the container runtime's defaults apply)")
	}

	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	for _, m := range s.Mounts {
		if m.Type != "tmpfs" || strings.HasPrefix(m.Destination, "/dev") {
			continue
		}
		size, err := tmpfsSize(m)
		if err != nil {
			return nil, err
		}
		if slices.Contains(m.Options, "noexec") && !slices.Contains(t.Unenforced, noexecNote) {
			t.Unenforced = append(t.Unenforced, noexecNote)
		}
		name := "tmpfs-" + strconv.Itoa(len(vols))
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: size}}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: m.Destination})
	}

	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	if opts.LocalhostSeccomp != "" {
		seccomp = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &opts.LocalhostSeccomp}
	} else {
		t.Unenforced = append(t.Unenforced, "agentnode's seccomp profile (RuntimeDefault instead)")
	}
	var runtimeClass *string
	if opts.RuntimeClass != "" {
		runtimeClass = &opts.RuntimeClass
	}
	var labels map[string]string
	if opts.Owner != "" {
		labels = map[string]string{OwnerLabel: opts.Owner}
	}

	t.Pod = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			HostNetwork:                   false,
			HostPID:                       false,
			HostIPC:                       false,
			DNSPolicy:                     corev1.DNSDefault,
			TerminationGracePeriodSeconds: new(int64),
			RuntimeClassName:              runtimeClass,
			NodeSelector:                  opts.NodeSelector,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &gid, SeccompProfile: seccomp,
			},
			Volumes: vols,
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           run.Image,
				ImagePullPolicy: corev1.PullNever,
				Command:         s.Process.Args,
				Env:             env,
				WorkingDir:      s.Process.Cwd,
				Stdin:           true,
				StdinOnce:       true,
				Resources:       res,
				VolumeMounts:    mounts,
				SecurityContext: &corev1.SecurityContext{
					ReadOnlyRootFilesystem:   &yes,
					AllowPrivilegeEscalation: &no,
					Privileged:               &no,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	return t, nil
}

// resources is the profile's memory and CPU limits, as limits and equal
// requests (the Guaranteed class).
func resources(r *specs.LinuxResources) (corev1.ResourceRequirements, error) {
	l := corev1.ResourceList{}
	if r.Memory != nil && r.Memory.Limit != nil && *r.Memory.Limit > 0 {
		l[corev1.ResourceMemory] = *resource.NewQuantity(*r.Memory.Limit, resource.BinarySI)
	}
	if r.CPU != nil && r.CPU.Quota != nil && r.CPU.Period != nil && *r.CPU.Quota > 0 && *r.CPU.Period > 0 {
		milli := (*r.CPU.Quota*1000 + int64(*r.CPU.Period) - 1) / int64(*r.CPU.Period)
		l[corev1.ResourceCPU] = *resource.NewMilliQuantity(milli, resource.DecimalSI)
	}
	if len(l) < 2 {
		return corev1.ResourceRequirements{}, errors.New("kubernetes: the profile has no memory or CPU limit")
	}
	return corev1.ResourceRequirements{Limits: l, Requests: l.DeepCopy()}, nil
}

// tmpfsSize is the size= option of a tmpfs mount.
func tmpfsSize(m specs.Mount) (*resource.Quantity, error) {
	for _, o := range m.Options {
		v, ok := strings.CutPrefix(o, "size=")
		if !ok {
			continue
		}
		mult := int64(1)
		switch {
		case strings.HasSuffix(v, "k"):
			mult, v = 1<<10, strings.TrimSuffix(v, "k")
		case strings.HasSuffix(v, "m"):
			mult, v = 1<<20, strings.TrimSuffix(v, "m")
		case strings.HasSuffix(v, "g"):
			mult, v = 1<<30, strings.TrimSuffix(v, "g")
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("kubernetes: mount %s: size %q: not a size", m.Destination, o)
		}
		return resource.NewQuantity(n*mult, resource.BinarySI), nil
	}
	return nil, fmt.Errorf("kubernetes: mount %s: no size (an emptyDir would be unbounded)", m.Destination)
}
