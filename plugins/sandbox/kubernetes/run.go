package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// Bounds of the steps around the tool (never the tool's own timeout).
const (
	startTimeout   = 2 * time.Minute // pod created → tool container running
	cleanupTimeout = 1 * time.Minute // delete → NotFound
	deadlineMargin = 3 * time.Minute // activeDeadlineSeconds past the timeout
	pollInterval   = 50 * time.Millisecond
)

// ErrPodFailed is wrapped when the pod never ran the tool (image missing,
// scheduling, a refused spec).
var ErrPodFailed = errors.New("the pod did not start the tool")

const verifyContainer = "verify"

// objectName is the pod's and ConfigMap's name for a run: a DNS label from
// the RunID and this process (RunIDs are not DNS names).
func (b *backend) objectName(runID string) string {
	sum := sha256.Sum256([]byte(b.owner + "/" + b.proc + "/" + runID))
	return "agentnode-" + hex.EncodeToString(sum[:12])
}

// Run runs one tool process in a pod of its own; see main.go.
func (b *backend) Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.RunResponse, error) {
	cs, err := b.clientset()
	if err != nil {
		return nil, err
	}
	if req.RunID == "" {
		return nil, errors.New("kubernetes: empty run id")
	}
	name := b.objectName(req.RunID)
	labels := map[string]string{OwnerLabel: b.owner, procLabel: b.proc, runLabel: name}
	tr, err := PodFor(req.Spec, PodOptions{Name: name, Owner: b.owner, RuntimeClass: b.cfg.RuntimeClass, NodeSelector: b.cfg.NodeSelector})
	if err != nil {
		return nil, err
	}
	if !req.Network {
		tr.Unenforced = append(tr.Unenforced, "network isolation where the cluster's CNI does not enforce NetworkPolicy")
	}
	for _, u := range tr.Unenforced {
		b.log.Debug("not enforced by a pod", "run_id", req.RunID, "what", u)
	}
	pk, err := readPack(req.PackageDir)
	if err != nil {
		return nil, err
	}
	pod := tr.Pod
	pod.Labels = labels
	b.addPack(pod, name, pk)
	b.addGate(pod)
	deadline := int64((req.Timeout + deadlineMargin + time.Second - 1) / time.Second)
	pod.Spec.ActiveDeadlineSeconds = &deadline

	ns := b.cfg.Namespace
	yes := true
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		BinaryData: pk.data,
		Immutable:  &yes,
	}
	// From here on, whatever happens, both objects are deleted and proven
	// gone before Run returns.
	resp := &sandbox.RunResponse{}
	runErr := func() error {
		if !req.Network {
			if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, denyAll(name, labels), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("kubernetes: creating the egress-deny network policy: %w", err)
			}
		}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("kubernetes: creating the package configmap: %w", err)
		}
		if b.afterPackage != nil {
			b.afterPackage(ctx, name)
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("kubernetes: creating the pod: %w", err)
		}
		return b.runPod(ctx, name, req, resp)
	}()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := b.deleteAndProve(cctx, name); err != nil {
		b.log.Error("pod or configmap not proven gone", "run_id", req.RunID, "pod", name, "error", err)
		return nil, errors.Join(runErr, err)
	}
	if runErr != nil {
		return nil, runErr
	}
	resp.CleanupVerified = true
	return resp, nil
}

// denyAll is the run's NetworkPolicy: no ingress, no egress for its pod
// (Spec.Network false). Only a CNI that enforces policies applies it.
func denyAll(name string, labels map[string]string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{runLabel: labels[runLabel]}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

// addPack projects the package ConfigMap read-only at /pack in every
// container and adds the init container that checks it.
func (b *backend) addPack(pod *corev1.Pod, name string, pk *pack) {
	mode := int32(0o444)
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "pack", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: name},
			Items:                pk.items,
			DefaultMode:          &mode,
		}}})
	tool := &pod.Spec.Containers[0]
	mount := corev1.VolumeMount{Name: "pack", MountPath: profile.PackDir, ReadOnly: true}
	tool.VolumeMounts = append(tool.VolumeMounts, mount)
	pod.Spec.InitContainers = []corev1.Container{{
		Name:            verifyContainer,
		Image:           tool.Image,
		ImagePullPolicy: corev1.PullNever,
		Command:         []string{"/bin/busybox", "sh", "-c", verifyScript},
		Env:             []corev1.EnvVar{{Name: "AGENTNODE_PACK_SHA256", Value: pk.manifest}},
		Resources:       *tool.Resources.DeepCopy(),
		VolumeMounts:    []corev1.VolumeMount{mount},
		SecurityContext: tool.SecurityContext.DeepCopy(),
	}}
}

// addGate makes the tool wait for the start gate (gateScript).
func (b *backend) addGate(pod *corev1.Pod) {
	tool := &pod.Spec.Containers[0]
	tool.Command = append([]string{"/bin/busybox", "sh", "-c", gateScript, "agentnode-gate"}, tool.Command...)
}

// runPod waits for the tool container, streams the I/O over attach under
// the run's timeout, and fills resp with how it ended.
func (b *backend) runPod(ctx context.Context, name string, req *sandbox.RunRequest, resp *sandbox.RunResponse) error {
	if err := b.waitRunning(ctx, name); err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if req.Timeout > 0 {
		var tcancel context.CancelFunc
		rctx, tcancel = context.WithTimeout(rctx, req.Timeout)
		defer tcancel()
	}
	stdin := req.Stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	stdout, stderr := req.Stdout, req.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	aerr := b.attach(rctx, name, io.MultiReader(strings.NewReader("\n"), stdin), stdout, stderr)
	// The attach ends when the container's streams close: its exit
	// status follows in the pod's status, awaited within the timeout.
	var st *corev1.ContainerStateTerminated
	var err error
	if aerr == nil || rctx.Err() == nil {
		st, err = b.waitTerminated(rctx, name)
	}
	if st == nil && rctx.Err() != nil {
		// Timeout, or cancelled (also: the host stopped reading output):
		// the pod is killed by its deletion, and the run still answers so
		// that the host learns whether that was proven.
		resp.Killed, resp.TimedOut, resp.ExitCode = true, ctx.Err() == nil, 137
		if ctx.Err() != nil {
			b.log.Debug("run cancelled", "pod", name, "cause", context.Cause(ctx))
		}
		return nil
	}
	if err != nil {
		if aerr != nil {
			return fmt.Errorf("kubernetes: attach: %w (then: %w)", aerr, err)
		}
		return err
	}
	resp.ExitCode = int(st.ExitCode)
	resp.OOMKilled = st.Reason == "OOMKilled"
	resp.Killed = resp.OOMKilled
	return nil
}

// waitRunning polls until the tool container runs. A failed verify init
// container is ErrPackageNotVerified; a container waiting for any reason
// but creation (ErrImageNeverPull, a refused config) is ErrPodFailed.
func (b *backend) waitRunning(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	pods := b.cs.CoreV1().Pods(b.cfg.Namespace)
	for {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("kubernetes: pod %s: %w", name, err)
		}
		for _, c := range p.Status.InitContainerStatuses {
			if t := c.State.Terminated; t != nil && t.ExitCode != 0 {
				return fmt.Errorf("kubernetes: %w (the tool was not started)", ErrPackageNotVerified)
			}
			if w := c.State.Waiting; w != nil && waitingFailed(w.Reason) {
				return fmt.Errorf("kubernetes: %w: %s: %s", ErrPodFailed, w.Reason, w.Message)
			}
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Running != nil || c.State.Terminated != nil {
				return nil
			}
			if w := c.State.Waiting; w != nil && waitingFailed(w.Reason) {
				return fmt.Errorf("kubernetes: %w: %s: %s", ErrPodFailed, w.Reason, w.Message)
			}
		}
		if p.Status.Phase == corev1.PodFailed {
			return fmt.Errorf("kubernetes: %w: pod failed: %s %s", ErrPodFailed, p.Status.Reason, p.Status.Message)
		}
		if err := sleep(ctx); err != nil {
			return fmt.Errorf("kubernetes: %w: not running: %w", ErrPodFailed, err)
		}
	}
}

func waitingFailed(reason string) bool {
	switch reason {
	case "", "ContainerCreating", "PodInitializing":
		return false
	}
	return true
}

// waitTerminated polls until the tool container has terminated.
func (b *backend) waitTerminated(ctx context.Context, name string) (*corev1.ContainerStateTerminated, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		p, err := b.cs.CoreV1().Pods(b.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("kubernetes: pod %s: %w", name, err)
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == ContainerName && c.State.Terminated != nil {
				return c.State.Terminated, nil
			}
		}
		if err := sleep(ctx); err != nil {
			return nil, fmt.Errorf("kubernetes: the tool's exit status: %w", err)
		}
	}
}

// attach streams stdin to the tool container and its stdout and stderr
// back (WebSocket, SPDY as a fallback, as kubectl does).
func (b *backend) attach(ctx context.Context, name string, stdin io.Reader, stdout, stderr io.Writer) error {
	r := b.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(b.cfg.Namespace).Name(name).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: ContainerName, Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(b.rc, "GET", r.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(b.rc, "POST", r.URL())
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// deleteAndProve deletes the pod, the ConfigMap and the NetworkPolicy
// named name with grace 0 and returns once the API answers NotFound for
// all three.
func (b *backend) deleteAndProve(ctx context.Context, name string) error {
	zero := int64(0)
	pods, cms := b.cs.CoreV1().Pods(b.cfg.Namespace), b.cs.CoreV1().ConfigMaps(b.cfg.Namespace)
	opts := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	if err := pods.Delete(ctx, name, opts); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes: deleting pod %s: %w", name, err)
	}
	if err := cms.Delete(ctx, name, opts); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes: deleting configmap %s: %w", name, err)
	}
	nps := b.cs.NetworkingV1().NetworkPolicies(b.cfg.Namespace)
	if err := nps.Delete(ctx, name, opts); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes: deleting network policy %s: %w", name, err)
	}
	for {
		_, perr := pods.Get(ctx, name, metav1.GetOptions{})
		_, cerr := cms.Get(ctx, name, metav1.GetOptions{})
		_, nerr := nps.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(perr) && apierrors.IsNotFound(cerr) && apierrors.IsNotFound(nerr) {
			return nil
		}
		if err := sleep(ctx); err != nil {
			return fmt.Errorf("kubernetes: pod %s not proven gone: %w", name, err)
		}
	}
}

func sleep(ctx context.Context) error {
	t := time.NewTimer(pollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
