package test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
)

// kubeSafetyNet bounds every wait on the test cluster. It is a safety net
// against a hung test, never the property under test.
const kubeSafetyNet = 3 * time.Minute

// requireKubernetes returns the directory of the cached Kubernetes build
// (test/k8s/build.sh). Without AGENTNODE_REQUIRE_KUBERNETES=1 it skips t
// when the build is not cached (building takes minutes) or t is not root;
// with it, it builds what is missing and fails instead of skipping.
func requireKubernetes(t testing.TB) string {
	t.Helper()
	required := os.Getenv("AGENTNODE_REQUIRE_KUBERNETES") == "1"
	if os.Geteuid() != 0 {
		if required {
			t.Fatal("AGENTNODE_REQUIRE_KUBERNETES=1 but not root: the test cluster needs root")
		}
		t.Skip("the test cluster needs root")
	}
	for _, bin := range []string{"containerd", "runc", "ctr", "openssl", "ip", "/usr/lib/cni/bridge", "/bin/busybox"} {
		if _, err := exec.LookPath(bin); err != nil {
			if required {
				t.Fatalf("AGENTNODE_REQUIRE_KUBERNETES=1 but %v (test/deps.sh test installs it)", err)
			}
			t.Skipf("test cluster: %v", err)
		}
	}
	args := []string{"--check"}
	if required {
		args = nil
	}
	out, err := exec.Command("k8s/build.sh", args...).Output()
	if err != nil {
		if required {
			t.Fatalf("k8s/build.sh: %v\n%s", err, stderrOf(err))
		}
		t.Skip("Kubernetes is not built: run test/k8s/build.sh (or set AGENTNODE_REQUIRE_KUBERNETES=1)")
	}
	return strings.TrimSpace(string(out))
}

func stderrOf(err error) []byte {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.Stderr
	}
	return nil
}

// kubeCluster is a running test/k8s/cluster.sh cluster.
type kubeCluster struct {
	dir, kubeconfig string
	env             map[string]string
}

// startKubeCluster brings a private cluster up in a new directory and
// registers its tear-down, which fails t unless cluster.sh down proves
// nothing of it is left (processes, mounts, cgroups, links).
func startKubeCluster(t *testing.T) *kubeCluster {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() {
		out, err := exec.Command("k8s/cluster.sh", "down", dir).CombinedOutput()
		if err != nil {
			t.Errorf("cluster.sh down: %v\n%s", err, out)
		}
	})
	start := time.Now()
	out, err := exec.Command("k8s/cluster.sh", "up", dir).Output()
	if err != nil {
		t.Fatalf("cluster.sh up: %v\n%s", err, stderrOf(err))
	}
	t.Logf("bring-up (node Ready): %v", time.Since(start).Round(time.Millisecond))
	c := &kubeCluster{dir: dir, kubeconfig: strings.TrimSpace(string(out)), env: map[string]string{}}
	envFile, err := os.ReadFile(filepath.Join(dir, "cluster.env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(envFile), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			c.env[k] = v
		}
	}
	return c
}

// image builds and imports a busybox image whose entrypoint is argv and
// returns its reference by digest.
func (c *kubeCluster) image(t *testing.T, name string, argv ...string) string {
	t.Helper()
	out, err := exec.Command("k8s/cluster.sh", append([]string{"image", c.dir, name}, argv...)...).Output()
	if err != nil {
		t.Fatalf("cluster.sh image: %v\n%s", err, stderrOf(err))
	}
	return strings.TrimSpace(string(out))
}

// rss sums the resident memory of every process in the cluster's cgroup
// (the control plane, containerd, its shims and the pods).
func (c *kubeCluster) rss(t *testing.T) (kb int64, procs int) {
	t.Helper()
	root := "/sys/fs/cgroup/pids/agentnode-k8s-" + c.env["ID"]
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != "cgroup.procs" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, pid := range strings.Fields(string(b)) {
			status, err := os.ReadFile("/proc/" + pid + "/status")
			if err != nil {
				continue
			}
			sc := bufio.NewScanner(bytes.NewReader(status))
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
					n, _ := strconv.ParseInt(f[1], 10, 64)
					kb += n
					procs++
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return kb, procs
}

// hardenedPod is the pod the Kubernetes backend is to run a tool in
// (issue 18): non-root 1000:1000, read-only root, no capabilities, no
// privilege escalation, RuntimeDefault seccomp, limits, tmpfs emptyDirs for
// /tmp and HOME, no service account token, no service links.
func hardenedPod(name, image string, command []string) *corev1.Pod {
	uid, no, yes := int64(1000), false, true
	tmpfs := func(n string) corev1.Volume {
		size := resource.MustParse("16Mi")
		return corev1.Volume{Name: n, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: &size}}}
	}
	limits := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("500m"),
		corev1.ResourceMemory: resource.MustParse("64Mi"),
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "agentnode-test"}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			DNSPolicy:                     corev1.DNSDefault,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: new(int64),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Volumes: []corev1.Volume{tmpfs("tmp"), tmpfs("home")},
			Containers: []corev1.Container{{
				Name:            "tool",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Command:         command,
				Env:             []corev1.EnvVar{{Name: "HOME", Value: "/home/sandbox"}},
				Stdin:           true,
				StdinOnce:       true,
				Resources:       corev1.ResourceRequirements{Limits: limits, Requests: limits},
				SecurityContext: &corev1.SecurityContext{
					ReadOnlyRootFilesystem:   &yes,
					AllowPrivilegeEscalation: &no,
					Privileged:               &no,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}, {Name: "home", MountPath: "/home/sandbox"}},
			}},
		},
	}
}

// probeScript echoes the line it reads, then reports from inside the pod
// what the hardening is supposed to take away.
const probeScript = `read line; echo "line=$line"
echo "uid=$(id -u) gid=$(id -g)"
touch /rootfs-write 2>/dev/null && echo ROOT-WRITABLE
grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status
grep -E ' /tmp | /home/sandbox ' /proc/self/mounts | cut -d' ' -f2,3
echo "memlimit=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"
ls /var/run/secrets/kubernetes.io 2>/dev/null && echo TOKEN-MOUNTED
env | grep -q ^PROBE_LINKS_ && echo SERVICE-LINKS
exit 0`

// TestKubernetesCluster brings a private single-node cluster up from the
// cached build, runs one hardened pod from a locally built image by digest,
// talks to it over attach, deletes it with grace 0 until the API says
// NotFound, and tears the cluster down with nothing left.
func TestKubernetesCluster(t *testing.T) {
	requireKubernetes(t)
	c := startKubeCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), kubeSafetyNet)
	defer cancel()

	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	img := c.image(t, "probe", "/bin/sh")
	if !strings.Contains(img, "@sha256:") {
		t.Fatalf("image reference %q is not by digest", img)
	}
	// The ServiceAccount admission refuses pods until the controller
	// manager has made the namespace's default service account.
	for {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no default service account: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A service in the pod's namespace, whose variables the pod must not
	// get (enableServiceLinks false). The kubelet injects the default
	// namespace's "kubernetes" service into every pod regardless.
	if _, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "probe-links"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	pods := cs.CoreV1().Pods("default")
	start := time.Now()
	pod, err := pods.Create(ctx, hardenedPod("probe", img, []string{"/bin/sh", "-c", probeScript}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for pod.Status.Phase != corev1.PodRunning {
		if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
			t.Fatalf("pod ended before attach: %+v", pod.Status)
		}
		for _, cst := range pod.Status.ContainerStatuses {
			if w := cst.State.Waiting; w != nil && w.Reason != "ContainerCreating" && w.Reason != "" {
				t.Fatalf("container waits: %s: %s", w.Reason, w.Message)
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("pod not running: %+v", pod.Status)
		}
		time.Sleep(50 * time.Millisecond)
		if pod, err = pods.Get(ctx, "probe", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("pod create → Running: %v", time.Since(start).Round(time.Millisecond))

	var stdout, stderr bytes.Buffer
	if err := attach(ctx, cfg, cs, "default", "probe", strings.NewReader("hello from agentnode\n"), &stdout, &stderr); err != nil {
		t.Fatalf("attach: %v\nstderr: %s", err, stderr.String())
	}
	out := stdout.String()
	t.Logf("pod said:\n%s", out)
	for _, want := range []string{
		"line=hello from agentnode\n",
		"uid=1000 gid=1000\n",
		"CapPrm:\t0000000000000000\n",
		"CapEff:\t0000000000000000\n",
		"CapBnd:\t0000000000000000\n",
		"NoNewPrivs:\t1\n",
		"Seccomp:\t2\n",
		"/tmp tmpfs\n",
		"/home/sandbox tmpfs\n",
		"memlimit=67108864\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("pod output lacks %q", want)
		}
	}
	for _, bad := range []string{"ROOT-WRITABLE", "TOKEN-MOUNTED", "SERVICE-LINKS"} {
		if strings.Contains(out, bad) {
			t.Errorf("pod output has %s", bad)
		}
	}

	zero := int64(0)
	if err := pods.Delete(ctx, "probe", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := pods.Get(ctx, "probe", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("pod not gone after delete: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	kb, procs := c.rss(t)
	t.Logf("cluster RSS: %d MB in %d processes", kb/1024, procs)
	if procs == 0 {
		t.Error("no process found in the cluster's cgroup")
	}
}

// attach streams stdin to the pod's container and its stdout and stderr
// back, over WebSocket with a fallback to SPDY (as kubectl does).
func attach(ctx context.Context, cfg *rest.Config, cs *kubernetes.Clientset, ns, name string, stdin *strings.Reader, stdout, stderr *bytes.Buffer) error {
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: "tool", Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
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
