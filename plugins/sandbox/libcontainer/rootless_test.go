package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/cgdelegate"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
	"github.com/agentnode/agentnode/sdk/testuser"
)

// asUserEnv makes this test binary, re-executed as a created user, answer
// one Availability request (TestAvailabilityAsUserHelper).
const asUserEnv = "AGENTNODE_TEST_AS_USER_AVAILABILITY"

// TestAvailabilityAsUserHelper is no test: re-executed as a created user
// (asUserEnv) it prints the real backend's Availability answer as JSON.
func TestAvailabilityAsUserHelper(t *testing.T) {
	if os.Getenv(asUserEnv) != "1" {
		t.Skip("helper for TestAvailabilityAsUser")
	}
	store := filepath.Join(os.Getenv(fixtureEnv), "images")
	resp, err := newBackend(nil).Availability(t.Context(), &sandbox.AvailabilityRequest{ImageStore: store, Image: fixtureImage})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(resp); err != nil {
		t.Fatal(err)
	}
}

// availabilityAs asks the backend, in a process of u, whether it can run.
func availabilityAs(t *testing.T, u *testuser.User) sandbox.AvailabilityResponse {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ensureFixture()
	if fixtureErr != nil {
		t.Fatalf("test rootfs: %v", fixtureErr)
	}
	out, err := u.Command([]string{asUserEnv + "=1", fixtureEnv + "=" + fixtureDir}, u.Executable(t, exe), "-test.run=^TestAvailabilityAsUserHelper$").Output()
	if err != nil {
		t.Fatalf("as %s: %v: %s", u, err, out)
	}
	var resp sandbox.AvailabilityResponse
	line, _, _ := strings.Cut(string(out), "\n")
	if err := json.Unmarshal([]byte(line), &resp); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return resp
}

// TestAvailabilityAsUser: a normal user without a delegated cgroup subtree
// is refused (not_permitted) with the one command that fixes it; with the
// subtree (and the user's own subordinate ids, from useradd) the backend
// is available.
func TestAvailabilityAsUser(t *testing.T) {
	u := testuser.Create(t, func(format string, args ...any) { skipOrFail(t, format, args...) })
	resp := availabilityAs(t, u)
	if resp.Available || resp.Reason != sandbox.ReasonNotPermitted || !strings.Contains(resp.Detail, cgdelegate.FixCommand(u.Name)) {
		t.Fatalf("without delegation: %+v; want not_permitted naming %q", resp, cgdelegate.FixCommand(u.Name))
	}
	if _, err := cgdelegate.Delegate(u.UID, u.GID); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cgdelegate.Undelegate(u.UID); err != nil {
			t.Errorf("Undelegate: %v", err)
		}
	})
	if resp = availabilityAs(t, u); !resp.Available {
		t.Fatalf("with delegation: %+v; want available", resp)
	}
}

// rootlessEnv marks this test binary re-executed as a created normal user
// with a delegated subtree (runAsUser): setup() then gives the tests the
// rootless backend instead of skipping.
const rootlessEnv = "AGENTNODE_TEST_ROOTLESS"

// runAsUser runs the tests matching pattern in this test binary as a
// created user with a delegated cgroup subtree and returns their output;
// each test in want must pass.
func runAsUser(t *testing.T, pattern string, want ...string) string {
	t.Helper()
	u := testuser.Create(t, func(format string, args ...any) { skipOrFail(t, format, args...) })
	if !u.HasSubIDs() {
		t.Fatalf("useradd gave %s no subordinate ids", u)
	}
	if _, err := cgdelegate.Delegate(u.UID, u.GID); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cgdelegate.Undelegate(u.UID); err != nil {
			t.Errorf("Undelegate: %v", err)
		}
	})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ensureFixture()
	if fixtureErr != nil {
		t.Fatalf("test rootfs: %v", fixtureErr)
	}
	prebuilt := filepath.Join(filepath.Dir(u.Home), "prebuilt")
	if err := os.Mkdir(prebuilt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := sandboxtest.Prebuild(t.Context(), prebuilt); err != nil {
		t.Fatal(err)
	}
	env := []string{rootlessEnv + "=1", requireEnv + "=1", fixtureEnv + "=" + fixtureDir, sandboxtest.PrebuiltEnv + "=" + prebuilt}
	out, err := u.Command(env, u.Executable(t, exe), "-test.run="+pattern, "-test.v", "-test.count=1").CombinedOutput()
	if err != nil {
		t.Fatalf("as %s: %v\n%s", u, err, out)
	}
	for _, name := range want {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("as %s: %s did not pass:\n%s", u, name, out)
		}
	}
	return string(out)
}

// TestRootlessRuns: the backend's own run tests, as a normal user with a
// delegated subtree.
func TestRootlessRuns(t *testing.T) {
	if os.Getenv(rootlessEnv) == "1" {
		t.Skip("already the created user")
	}
	tests := []string{"TestUserAndPack", "TestExitCode", "TestReadOnlyRoot", "TestCgroupLimitsApplied"}
	out := runAsUser(t, "^("+strings.Join(tests, "|")+")$", tests...)
	t.Logf("%s", out)
}

// TestConformanceRootless: the shared conformance and escape suite
// (sdk/sandbox/sandboxtest), through the real gRPC plugin path, as a
// normal user with a delegated subtree.
func TestConformanceRootless(t *testing.T) {
	if os.Getenv(rootlessEnv) == "1" {
		t.Skip("already the created user")
	}
	out := runAsUser(t, "^TestConformance$", "TestConformance")
	t.Logf("%s", out)
}

// BenchmarkRootless: a trivial tool (busybox true) run by root with the
// user namespace (ns/op) and, side by side, by a created normal user with a
// delegated subtree (rootless-ns/op: BenchmarkLibcontainerTrivial in this
// test binary re-executed as that user, 50 runs) and their ratio. Compare
// BenchmarkUserNamespace for root without the user namespace.
func BenchmarkRootless(b *testing.B) {
	if os.Getenv(rootlessEnv) == "1" {
		b.Skip("already the created user")
	}
	u := testuser.Create(b, func(format string, args ...any) { skipOrFail(b, format, args...) })
	if _, err := cgdelegate.Delegate(u.UID, u.GID); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := cgdelegate.Undelegate(u.UID); err != nil {
			b.Errorf("Undelegate: %v", err)
		}
	})
	ensureFixture()
	if fixtureErr != nil {
		b.Fatalf("test rootfs: %v", fixtureErr)
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	env := []string{rootlessEnv + "=1", requireEnv + "=1", fixtureEnv + "=" + fixtureDir}
	out, err := u.Command(env, u.Executable(b, exe), "-test.run=^$", "-test.bench=^BenchmarkLibcontainerTrivial$", "-test.benchtime=50x", "-test.count=1").CombinedOutput()
	if err != nil {
		b.Fatalf("as %s: %v\n%s", u, err, out)
	}
	var rootless float64
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && strings.HasPrefix(f[0], "BenchmarkLibcontainerTrivial") && f[3] == "ns/op" {
			rootless, _ = strconv.ParseFloat(f[2], 64)
		}
	}
	if rootless == 0 {
		b.Fatalf("no ns/op in the rootless benchmark's output:\n%s", out)
	}
	run := benchLC(b)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		run()
	}
	root := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	b.ReportMetric(rootless, "rootless-ns/op")
	b.ReportMetric(rootless/root, "rootless/root")
}
