package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels of every object this backend creates (OwnerLabel is in pod.go).
const (
	// procLabel names the plugin process: <pid>.<start time in ticks>.
	procLabel = "agentnode.dev/process"
	// runLabel is the object's run (a hash of the RunID: label values
	// are short).
	runLabel = "agentnode.dev/run"
)

// hostOwner is this host's OwnerLabel value: a hash of the boot id and
// the pid namespace, so that a process label is only ever compared with a
// process of the same machine, boot and namespace.
func hostOwner() (string, error) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(string(boot)) + "/" + ns))
	return "h-" + hex.EncodeToString(sum[:12]), nil
}

// processLabel is procLabel's value for pid.
func processLabel(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", fmt.Errorf("short /proc/%d/stat", pid)
	}
	return strconv.Itoa(pid) + "." + f[19], nil
}

// deadProcess: the process a procLabel value names no longer runs (its pid
// is gone or now names a process started at another time). A malformed
// value is never taken for dead.
func deadProcess(label string) bool {
	pidStr, _, ok := strings.Cut(label, ".")
	pid, err := strconv.Atoi(pidStr)
	if !ok || err != nil || pid <= 0 {
		return false
	}
	now, err := processLabel(pid)
	return err != nil || now != label
}

// reapOrphans deletes, and proves gone, this host's pods, ConfigMaps and
// NetworkPolicies whose plugin process is dead: nobody enforces their
// timeout any more.
func (b *backend) reapOrphans(ctx context.Context) (int, error) {
	cs, err := b.clientset()
	if err != nil {
		return 0, err
	}
	sel := metav1.ListOptions{LabelSelector: OwnerLabel + "=" + b.owner}
	pods, err := cs.CoreV1().Pods(b.cfg.Namespace).List(ctx, sel)
	if err != nil {
		return 0, fmt.Errorf("kubernetes: listing pods: %w", err)
	}
	cms, err := cs.CoreV1().ConfigMaps(b.cfg.Namespace).List(ctx, sel)
	if err != nil {
		return 0, fmt.Errorf("kubernetes: listing configmaps: %w", err)
	}
	nps, err := cs.NetworkingV1().NetworkPolicies(b.cfg.Namespace).List(ctx, sel)
	if err != nil {
		return 0, fmt.Errorf("kubernetes: listing network policies: %w", err)
	}
	names := map[string]bool{}
	for _, n := range nps.Items {
		if deadProcess(n.Labels[procLabel]) {
			names[n.Name] = true
		}
	}
	for _, p := range pods.Items {
		if deadProcess(p.Labels[procLabel]) {
			names[p.Name] = true
		}
	}
	for _, c := range cms.Items {
		if deadProcess(c.Labels[procLabel]) {
			names[c.Name] = true
		}
	}
	var errs []error
	n := 0
	for name := range names {
		b.log.Warn("deleting a pod orphaned by a dead plugin process", "pod", name)
		if err := b.deleteAndProve(ctx, name); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
