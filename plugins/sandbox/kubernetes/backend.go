package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	authv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/agentnode/agentnode/sdk/sandbox"
)

// minMinor is the oldest Kubernetes 1.x this backend runs on: immutable
// ConfigMaps, pod seccompProfile and the attach API it uses are all there.
const minMinor = 27

// unenforcedNote is what an available answer reports a pod does not
// enforce of the profile (PodFor's Translation.Unenforced, and the network).
const unenforcedNote = "pods do not enforce: the per-run pids limit (the kubelet's podPidsLimit applies), rlimits, " +
	"noexec on the tmpfs mounts, agentnode's own seccomp filter (RuntimeDefault instead), " +
	"network isolation unless the cluster's CNI enforces NetworkPolicy"

// backend implements sandbox.Backend on a Kubernetes cluster.
type backend struct {
	log    hclog.Logger
	cfg    *Config
	cfgErr error
	owner  string // OwnerLabel value: this host
	proc   string // procLabel value: this process

	once sync.Once
	rc   *rest.Config
	cs   *kubernetes.Clientset
	cErr error

	// afterPackage, when set (tests), runs between the ConfigMap's and
	// the pod's creation: the window in which a cluster user could swap
	// the package.
	afterPackage func(ctx context.Context, name string)
}

func newBackend(log hclog.Logger, cfg *Config, cfgErr error) *backend {
	b := &backend{log: log, cfg: cfg, cfgErr: cfgErr}
	if cfgErr == nil && cfg == nil {
		b.cfgErr = fmt.Errorf("%w: none", ErrConfig)
	}
	owner, err := hostOwner()
	if err == nil {
		b.owner = owner
		b.proc, err = processLabel(os.Getpid())
	}
	if err != nil && b.cfgErr == nil {
		b.cfgErr = fmt.Errorf("kubernetes: owner labels: %w", err)
	}
	return b
}

// clientset is the API client, made once from the kubeconfig.
func (b *backend) clientset() (*kubernetes.Clientset, error) {
	if b.cfgErr != nil {
		return nil, b.cfgErr
	}
	b.once.Do(func() {
		b.rc, b.cErr = b.cfg.restConfig()
		if b.cErr == nil {
			b.cs, b.cErr = kubernetes.NewForConfig(b.rc)
		}
	})
	return b.cs, b.cErr
}

// permissions are what a run needs in the namespace.
var permissions = []authv1.ResourceAttributes{
	{Verb: "create", Resource: "pods"},
	{Verb: "get", Resource: "pods"},
	{Verb: "delete", Resource: "pods"},
	{Verb: "list", Resource: "pods"},
	{Verb: "create", Resource: "pods", Subresource: "attach"},
	{Verb: "get", Resource: "pods", Subresource: "attach"},
	{Verb: "create", Resource: "configmaps"},
	{Verb: "get", Resource: "configmaps"},
	{Verb: "delete", Resource: "configmaps"},
	{Verb: "list", Resource: "configmaps"},
	{Group: "networking.k8s.io", Verb: "create", Resource: "networkpolicies"},
	{Group: "networking.k8s.io", Verb: "get", Resource: "networkpolicies"},
	{Group: "networking.k8s.io", Verb: "delete", Resource: "networkpolicies"},
	{Group: "networking.k8s.io", Verb: "list", Resource: "networkpolicies"},
}

// Availability: not_installed without a usable configuration, not_running
// when the API server does not answer, incompatible for an old cluster or
// a runtime other than native, not_permitted when a
// SelfSubjectAccessReview denies one of the permissions a run needs,
// image_missing when no node reports the image by digest (checked only
// where nodes may be listed).
func (b *backend) Availability(ctx context.Context, req *sandbox.AvailabilityRequest) (*sandbox.AvailabilityResponse, error) {
	if rt, err := sandbox.NormalizeRuntime(req.Runtime); err != nil || rt != sandbox.RuntimeNative {
		return &sandbox.AvailabilityResponse{Reason: sandbox.ReasonIncompatible,
			Detail: "the kubernetes backend runs the native runtime only (a RuntimeClass is set with sandbox.kubernetes.runtime_class)"}, nil
	}
	cs, err := b.clientset()
	if err != nil {
		return &sandbox.AvailabilityResponse{Reason: sandbox.ReasonNotInstalled, Detail: err.Error()}, nil
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return &sandbox.AvailabilityResponse{Reason: sandbox.ReasonNotRunning, Detail: "the API server does not answer: " + err.Error()}, nil
	}
	minor, _ := strconv.Atoi(strings.TrimRight(v.Minor, "+"))
	if v.Major != "1" || minor < minMinor {
		return &sandbox.AvailabilityResponse{Reason: sandbox.ReasonIncompatible,
			Detail: fmt.Sprintf("Kubernetes %s.%s is older than 1.%d", v.Major, v.Minor, minMinor)}, nil
	}
	for _, p := range permissions {
		p.Namespace = b.cfg.Namespace
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &p}}, metav1.CreateOptions{})
		if err != nil {
			return &sandbox.AvailabilityResponse{Reason: sandbox.ReasonNotRunning, Detail: "access review: " + err.Error()}, nil
		}
		if !r.Status.Allowed {
			what := p.Resource
			if p.Subresource != "" {
				what += "/" + p.Subresource
			}
			return &sandbox.AvailabilityResponse{Reason: sandbox.ReasonNotPermitted,
				Detail: fmt.Sprintf("may not %s %s in namespace %s", p.Verb, what, b.cfg.Namespace)}, nil
		}
	}
	if req.Image != "" {
		present, checked, err := b.imageOnNodes(ctx, req.Image)
		switch {
		case err != nil:
			return &sandbox.AvailabilityResponse{Reason: sandbox.ReasonNotRunning, Detail: "listing nodes: " + err.Error()}, nil
		case checked && !present:
			return &sandbox.AvailabilityResponse{Reason: sandbox.ReasonImageMissing,
				Detail: "no node reports image " + req.Image + " (pods never pull: load it into the nodes' runtime)"}, nil
		}
	}
	return &sandbox.AvailabilityResponse{Available: true, Runtime: sandbox.RuntimeNative,
		Detail: "Kubernetes " + v.GitVersion + ", namespace " + b.cfg.Namespace + "; " + unenforcedNote}, nil
}

// imageOnNodes reports whether a node that the pods may be scheduled on
// (nodeSelector) lists image among its images. checked is false when
// nodes may not be listed.
func (b *backend) imageOnNodes(ctx context.Context, image string) (present, checked bool, err error) {
	sel := ""
	for k, v := range b.cfg.NodeSelector {
		if sel != "" {
			sel += ","
		}
		sel += k + "=" + v
	}
	nodes, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if apierrors.IsForbidden(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	for _, n := range nodes.Items {
		for _, img := range n.Status.Images {
			for _, name := range img.Names {
				if name == image {
					return true, true, nil
				}
			}
		}
	}
	return false, true, nil
}
