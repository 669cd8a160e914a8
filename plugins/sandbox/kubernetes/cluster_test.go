package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// safetyNet bounds every wait on the test cluster: a net against a hung
// test, never the property under test.
const safetyNet = 3 * time.Minute

// k8sDir is test/k8s of this repository (build.sh, cluster.sh).
var k8sDir = filepath.Join("..", "..", "..", "test", "k8s")

// testCluster is a private test/k8s/cluster.sh cluster.
type testCluster struct {
	dir, kubeconfig, image string
	cs                     *kubernetes.Clientset
}

// requireCluster brings up a private single-node cluster (test/k8s) in a
// temporary directory, torn down when t ends (t fails unless cluster.sh
// down proves nothing is left). Without AGENTNODE_REQUIRE_KUBERNETES=1 it
// skips unless root and the build is cached; with it, it builds what is
// missing and fails instead of skipping.
func requireCluster(t *testing.T) *testCluster {
	t.Helper()
	required := os.Getenv("AGENTNODE_REQUIRE_KUBERNETES") == "1"
	skip := func(format string, args ...any) {
		t.Helper()
		if required {
			t.Fatalf("AGENTNODE_REQUIRE_KUBERNETES=1 but "+format, args...)
		}
		t.Skipf(format, args...)
	}
	if os.Geteuid() != 0 {
		skip("not root: the test cluster needs root")
	}
	for _, bin := range []string{"containerd", "runc", "ctr", "openssl", "ip", "/usr/lib/cni/bridge", "/bin/busybox"} {
		if _, err := exec.LookPath(bin); err != nil {
			skip("%v (test/deps.sh test installs it)", err)
		}
	}
	args := []string{"--check"}
	if required {
		args = nil
	}
	if out, err := exec.Command(filepath.Join(k8sDir, "build.sh"), args...).CombinedOutput(); err != nil {
		skip("Kubernetes is not built (test/k8s/build.sh): %v\n%s", err, out)
	}
	dir, err := os.MkdirTemp("", "agentnode-k8s-plugin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		out, err := exec.Command(filepath.Join(k8sDir, "cluster.sh"), "down", dir).CombinedOutput()
		if err != nil {
			t.Errorf("cluster.sh down: %v\n%s", err, out)
			return
		}
		_ = os.RemoveAll(dir)
	})
	out, err := exec.Command(filepath.Join(k8sDir, "cluster.sh"), "up", dir).Output()
	if err != nil {
		t.Fatalf("cluster.sh up: %v\n%s", err, stderrOf(err))
	}
	c := &testCluster{dir: dir, kubeconfig: strings.TrimSpace(string(out))}
	img, err := exec.Command(filepath.Join(k8sDir, "cluster.sh"), "image", dir, "tool", "/bin/sh").Output()
	if err != nil {
		t.Fatalf("cluster.sh image: %v\n%s", err, stderrOf(err))
	}
	c.image = strings.TrimSpace(string(img))
	rc, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if c.cs, err = kubernetes.NewForConfig(rc); err != nil {
		t.Fatal(err)
	}
	// Pods are refused until the namespace's default service account exists.
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	for {
		_, err := c.cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no default service account: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return c
}

func stderrOf(err error) []byte {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.Stderr
	}
	return nil
}

// backendFor is a backend on c's cluster, in namespace default.
func backendFor(t *testing.T, kubeconfig string) *backend {
	t.Helper()
	cfg, err := parseConfig([]byte(`{"kubeconfig": "` + kubeconfig + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	return newBackend(hclog.New(&hclog.LoggerOptions{Name: "kubernetes-test", Output: os.Stderr, Level: hclog.Warn}), cfg, nil)
}

// ownedObjects lists the pods, ConfigMaps and NetworkPolicies carrying b's owner label.
func ownedObjects(t *testing.T, c *testCluster, b *backend) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	sel := metav1.ListOptions{LabelSelector: OwnerLabel + "=" + b.owner}
	pods, err := c.cs.CoreV1().Pods("default").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	cms, err := c.cs.CoreV1().ConfigMaps("default").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	nps, err := c.cs.NetworkingV1().NetworkPolicies("default").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nps.Items {
		names = append(names, "networkpolicy/"+n.Name)
	}
	for _, p := range pods.Items {
		names = append(names, "pod/"+p.Name)
	}
	for _, m := range cms.Items {
		names = append(names, "configmap/"+m.Name)
	}
	return names
}
