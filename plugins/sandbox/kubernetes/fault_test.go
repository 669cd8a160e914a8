package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/sandbox"
)

// TestKubernetesAPIServerStopped stops the API server of a cluster of its
// own mid-run: the run must end as a refusal (an error, no result), since
// the pod's deletion can no longer be proven; never as a result claiming
// a clean end.
func TestKubernetesAPIServerStopped(t *testing.T) {
	c := requireCluster(t)
	b := backendFor(t, c.kubeconfig)
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	raw, err := os.ReadFile(filepath.Join(c.dir, "run", "kube-apiserver.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	pack := writePack(t, map[string]string{"tool.sh": "echo started; exec sleep 600\n"})
	out := &signalWriter{seen: make(chan struct{})}
	killed := make(chan error, 1)
	go func() {
		select {
		case <-out.seen:
			killed <- syscall.Kill(pid, syscall.SIGKILL)
		case <-ctx.Done():
			killed <- ctx.Err()
		}
	}()
	start := time.Now()
	resp, err := b.Run(ctx, &sandbox.RunRequest{Spec: runSpec(c.image, pack, time.Hour, "/bin/sh", "/pack/tool.sh"), Stdout: out})
	if kerr := <-killed; kerr != nil {
		t.Fatalf("stopping the API server: %v", kerr)
	}
	t.Logf("Run returned after %v: %+v, %v", time.Since(start).Round(time.Millisecond), resp, err)
	if err == nil {
		t.Fatalf("Run = %+v, nil; want an error: the cleanup cannot be proven without the API server", resp)
	}
	if resp != nil {
		t.Errorf("Run returned a result with its error: %+v", resp)
	}
}
