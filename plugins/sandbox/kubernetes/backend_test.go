package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// writePack makes a package directory holding files (name → content;
// names ending in .sh are executable).
func writePack(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runSpec(image, pack string, timeout time.Duration, args ...string) sandbox.Spec {
	return sandbox.Spec{
		RunID: "run-" + strings.ReplaceAll(time.Now().Format("150405.000000000"), ".", "-"), Image: image,
		ImageStore: "/nonexistent-store", PackageDir: pack, Args: args, Timeout: timeout,
		Limits: sandbox.Limits{MemoryBytes: 64 << 20, CPUs: 0.5, TmpBytes: 8 << 20, Pids: 64},
	}
}

// TestKubernetesBackend runs the backend against a real private cluster:
// availability, a tool over attach, a timeout, a package swapped after
// verification, orphan reaping. No pod or ConfigMap may be left.
func TestKubernetesBackend(t *testing.T) {
	c := requireCluster(t)
	b := backendFor(t, c.kubeconfig)
	ctx, cancel := context.WithTimeout(context.Background(), 4*safetyNet)
	defer cancel()
	t.Cleanup(func() {
		if left := ownedObjects(t, c, b); len(left) > 0 {
			t.Errorf("objects left behind: %v", left)
		}
	})

	t.Run("NotRunning", func(t *testing.T) {
		// The same credentials, an address where no API server listens.
		kc, err := clientcmd.LoadFromFile(c.kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		for _, cl := range kc.Clusters {
			cl.Server = "https://127.0.0.1:1"
		}
		p := filepath.Join(t.TempDir(), "kubeconfig")
		if err := clientcmd.WriteToFile(*kc, p); err != nil {
			t.Fatal(err)
		}
		r, err := backendFor(t, p).Availability(ctx, &sandbox.AvailabilityRequest{Image: c.image})
		if err != nil || r.Available || r.Reason != sandbox.ReasonNotRunning {
			t.Fatalf("Availability = %+v, %v; want not_running", r, err)
		}
	})

	t.Run("NotPermitted", func(t *testing.T) {
		// A service account with no role: authenticated, allowed nothing.
		sa, err := c.cs.CoreV1().ServiceAccounts("default").Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.cs.CoreV1().ServiceAccounts("default").Delete(context.WithoutCancel(ctx), sa.Name, metav1.DeleteOptions{})
		tok, err := c.cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa.Name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kc, err := clientcmd.LoadFromFile(c.kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range kc.AuthInfos {
			*u = clientcmdapi.AuthInfo{Token: tok.Status.Token}
		}
		p := filepath.Join(t.TempDir(), "kubeconfig")
		if err := clientcmd.WriteToFile(*kc, p); err != nil {
			t.Fatal(err)
		}
		r, err := backendFor(t, p).Availability(ctx, &sandbox.AvailabilityRequest{Image: c.image})
		if err != nil || r.Available || r.Reason != sandbox.ReasonNotPermitted || !strings.Contains(r.Detail, "pods") {
			t.Fatalf("Availability = %+v, %v; want not_permitted naming pods", r, err)
		}
		if strings.Contains(r.Detail, tok.Status.Token) {
			t.Fatal("the detail carries the token")
		}
	})

	t.Run("Echo", func(t *testing.T) {
		pack := writePack(t, map[string]string{
			"tool.sh":     "read line; echo \"got $line\"; cat /pack/data/in.txt; echo to-stderr >&2; id -u; env; touch /pack/x 2>/dev/null && echo PACK-WRITABLE; exit 3\n",
			"data/in.txt": "packaged data\n",
		})
		policy := false
		b.afterPackage = func(ctx context.Context, name string) {
			// Network false: the run's pod is selected by a deny-all policy.
			np, err := c.cs.NetworkingV1().NetworkPolicies("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("network policy: %v", err)
				return
			}
			policy = len(np.Spec.PolicyTypes) == 2 && len(np.Spec.Ingress)+len(np.Spec.Egress) == 0 &&
				np.Spec.PodSelector.MatchLabels[runLabel] == name
		}
		defer func() { b.afterPackage = nil }()
		var out, errb bytes.Buffer
		resp, err := b.Run(ctx, &sandbox.RunRequest{Spec: runSpec(c.image, pack, time.Minute, "/bin/sh", "/pack/tool.sh"),
			Stdin: strings.NewReader("hello pod\n"), Stdout: &out, Stderr: &errb})
		if !policy {
			t.Error("no deny-all network policy selected the run's pod")
		}
		if err != nil {
			t.Fatalf("Run: %v\nstderr: %s", err, errb.String())
		}
		if resp.ExitCode != 3 || resp.TimedOut || resp.Killed || !resp.CleanupVerified {
			t.Errorf("Run = %+v; want exit 3, cleanup verified", resp)
		}
		for _, want := range []string{"got hello pod\n", "packaged data\n", "\n1000\n"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("stdout lacks %q:\n%s", want, out.String())
			}
		}
		if errb.String() != "to-stderr\n" {
			t.Errorf("stderr = %q", errb.String())
		}
		if strings.Contains(out.String(), "PACK-WRITABLE") {
			t.Error("/pack is writable")
		}
		// The kubeconfig's credentials never reach the pod.
		kc, err := os.ReadFile(c.kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(kc), "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), ": "); ok && strings.HasSuffix(k, "-data") && len(v) > 40 &&
				strings.Contains(out.String(), v[len(v)/2:len(v)/2+32]) {
				t.Errorf("the pod saw the kubeconfig's %s", k)
			}
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		pack := writePack(t, map[string]string{"tool.sh": "echo started; exec sleep 600\n"})
		var out bytes.Buffer
		start := time.Now()
		resp, err := b.Run(ctx, &sandbox.RunRequest{Spec: runSpec(c.image, pack, 2*time.Second, "/bin/sh", "/pack/tool.sh"), Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("timed-out run returned after %v", time.Since(start).Round(time.Millisecond))
		if !resp.TimedOut || !resp.Killed || !resp.CleanupVerified || resp.ExitCode != 137 {
			t.Errorf("Run = %+v; want timed out, killed, 137, cleanup verified", resp)
		}
		if out.String() != "started\n" {
			t.Errorf("stdout = %q", out.String())
		}
		if left := ownedObjects(t, c, b); len(left) > 0 {
			t.Errorf("left after the timeout: %v", left)
		}
	})

	t.Run("Cancel", func(t *testing.T) {
		// The host cancels mid-run: the pod is killed (deleted) and the
		// run still answers, with the cleanup proven.
		pack := writePack(t, map[string]string{"tool.sh": "echo started; exec sleep 600\n"})
		rctx, rcancel := context.WithCancel(ctx)
		defer rcancel()
		out := &signalWriter{seen: make(chan struct{})}
		go func() {
			select {
			case <-out.seen:
				rcancel()
			case <-rctx.Done():
			}
		}()
		resp, err := b.Run(rctx, &sandbox.RunRequest{Spec: runSpec(c.image, pack, time.Hour, "/bin/sh", "/pack/tool.sh"), Stdout: out})
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Killed || resp.TimedOut || !resp.CleanupVerified {
			t.Errorf("Run = %+v; want killed, not timed out, cleanup verified", resp)
		}
		if left := ownedObjects(t, c, b); len(left) > 0 {
			t.Errorf("left after the cancellation: %v", left)
		}
	})

	t.Run("PackageSwapped", func(t *testing.T) {
		pack := writePack(t, map[string]string{"tool.sh": "echo RAN-VERIFIED\n"})
		swapped := false
		b.afterPackage = func(ctx context.Context, name string) {
			// A cluster user replaces the (immutable) ConfigMap between its
			// creation and the pod's start.
			cms := c.cs.CoreV1().ConfigMaps("default")
			cm, err := cms.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Error(err)
				return
			}
			cm.ResourceVersion, cm.UID = "", ""
			cm.BinaryData["f0"] = []byte("echo RAN-SWAPPED\n")
			if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Error(err)
				return
			}
			swapped = true
		}
		defer func() { b.afterPackage = nil }()
		var out bytes.Buffer
		resp, err := b.Run(ctx, &sandbox.RunRequest{Spec: runSpec(c.image, pack, time.Minute, "/bin/sh", "/pack/tool.sh"), Stdout: &out})
		if !swapped {
			t.Fatal("the package was not swapped")
		}
		if !errors.Is(err, ErrPackageNotVerified) {
			t.Fatalf("Run = %+v, %v; want %v", resp, err, ErrPackageNotVerified)
		}
		if strings.Contains(out.String(), "RAN") {
			t.Errorf("the tool ran: %q", out.String())
		}
		if left := ownedObjects(t, c, b); len(left) > 0 {
			t.Errorf("left after the refusal: %v", left)
		}
	})

	t.Run("Orphans", func(t *testing.T) {
		// A process that has ended: the owner of an orphan.
		sleeper := exec.Command("sleep", "60")
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		dead, err := processLabel(sleeper.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		_ = sleeper.Process.Kill()
		_ = sleeper.Wait()
		mk := func(name, proc string) {
			labels := map[string]string{OwnerLabel: b.owner, procLabel: proc, runLabel: name}
			tr, err := PodFor(runSpec(c.image, "/pack-src", time.Minute, "/bin/sleep", "600"), PodOptions{Name: name})
			if err != nil {
				t.Fatal(err)
			}
			tr.Pod.Labels = labels
			if _, err := c.cs.CoreV1().Pods("default").Create(ctx, tr.Pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		mk("orphan", dead)
		mk("alive", b.proc) // a live plugin process's run: not an orphan
		n, err := b.reapOrphans(ctx)
		if err != nil || n != 1 {
			t.Fatalf("reapOrphans = %d, %v; want 1", n, err)
		}
		if _, err := c.cs.CoreV1().Pods("default").Get(ctx, "orphan", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("orphan pod: %v; want NotFound", err)
		}
		if _, err := c.cs.CoreV1().Pods("default").Get(ctx, "alive", metav1.GetOptions{}); err != nil {
			t.Errorf("the live process's pod was reaped: %v", err)
		}
		if err := b.deleteAndProve(ctx, "alive"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Available", func(t *testing.T) {
		// The kubelet reports a newly imported image with its next node
		// status update.
		waitNodeImage(ctx, t, c)
		r, err := b.Availability(ctx, &sandbox.AvailabilityRequest{Image: c.image})
		if err != nil || !r.Available || r.Runtime != sandbox.RuntimeNative {
			t.Fatalf("Availability = %+v, %v; want available, native", r, err)
		}
		if !strings.Contains(r.Detail, "RuntimeDefault") || !strings.Contains(r.Detail, "NetworkPolicy") {
			t.Errorf("the available answer does not report what pods leave unenforced: %q", r.Detail)
		}
		missing := c.image[:strings.LastIndex(c.image, ":")+1] + strings.Repeat("0", 64)
		r, err = b.Availability(ctx, &sandbox.AvailabilityRequest{Image: missing})
		if err != nil || r.Available || r.Reason != sandbox.ReasonImageMissing {
			t.Fatalf("Availability(missing image) = %+v, %v; want image_missing", r, err)
		}
		r, err = b.Availability(ctx, &sandbox.AvailabilityRequest{Image: c.image, Runtime: sandbox.RuntimeGVisor})
		if err != nil || r.Available || r.Reason != sandbox.ReasonIncompatible {
			t.Fatalf("Availability(gvisor) = %+v, %v; want incompatible", r, err)
		}
	})

	t.Run("Binary", func(t *testing.T) {
		// The built plugin through go-plugin, as agentnode starts it,
		// configured by <binary>.json; at start it reaps an orphan.
		bin := filepath.Join(t.TempDir(), "agentnode-sandbox-kubernetes")
		if out, err := exec.Command(goTool(), "build", "-trimpath", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("building the plugin: %v\n%s", err, out)
		}
		if err := os.WriteFile(bin+".json", []byte(`{"kubeconfig": "`+c.kubeconfig+`", "namespace": "default"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		sleeper := exec.Command("sleep", "60")
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		dead, err := processLabel(sleeper.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		_ = sleeper.Process.Kill()
		_ = sleeper.Wait()
		if _, err := c.cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "orphan-cm",
			Labels: map[string]string{OwnerLabel: b.owner, procLabel: dead}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		client := sandboxtest.LaunchPlugin(t, bin)
		r, err := client.Availability(ctx, &sandbox.AvailabilityRequest{Image: c.image})
		if err != nil || !r.Available {
			t.Fatalf("Availability = %+v, %v", r, err)
		}
		pack := writePack(t, map[string]string{"tool.sh": "read l; echo \"plugin got $l\"\n"})
		var out bytes.Buffer
		resp, err := client.Run(ctx, &sandbox.RunRequest{Spec: runSpec(c.image, pack, time.Minute, "/bin/sh", "/pack/tool.sh"),
			Stdin: strings.NewReader("hi\n"), Stdout: &out})
		if err != nil || resp.ExitCode != 0 || !resp.CleanupVerified || out.String() != "plugin got hi\n" {
			t.Fatalf("Run = %+v, %v, stdout %q", resp, err, out.String())
		}
		for {
			_, err := c.cs.CoreV1().ConfigMaps("default").Get(ctx, "orphan-cm", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("the plugin did not reap the orphan: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// waitNodeImage waits until the node's status lists c.image.
func waitNodeImage(ctx context.Context, t *testing.T, c *testCluster) {
	t.Helper()
	for {
		nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, n := range nodes.Items {
			for _, img := range n.Status.Images {
				names = append(names, img.Names...)
			}
		}
		for _, n := range names {
			if n == c.image {
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the node never listed %s; it lists %v", c.image, names)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// goTool is the go command that runs this test.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// signalWriter closes seen on its first write.
type signalWriter struct {
	once sync.Once
	seen chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.seen) })
	return len(p), nil
}
