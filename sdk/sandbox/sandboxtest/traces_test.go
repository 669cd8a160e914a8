package sandboxtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNamesRun(t *testing.T) {
	for _, tc := range []struct {
		name, id string
		want     bool
	}{
		{"sandboxtest-x-10-1", "sandboxtest-x-10-1", true},
		{"docker-sandboxtest-x-10-1.scope", "sandboxtest-x-10-1", true},
		{"sandboxtest-x-10-12", "sandboxtest-x-10-1", false},
		{"sandboxtest-x-10-12-sandboxtest-x-10-1", "sandboxtest-x-10-1", true},
		{"other", "sandboxtest-x-10-1", false},
	} {
		if got := namesRun(tc.name, tc.id); got != tc.want {
			t.Errorf("namesRun(%q, %q) = %v, want %v", tc.name, tc.id, got, tc.want)
		}
	}
}

// TestCgroupTraceFound plants a cgroup named after a run id and checks that
// the leftover scan finds it (so the timeout and flood checks can fail).
func TestCgroupTraceFound(t *testing.T) {
	id := "sandboxtest-trace-" + randomHex(4) + "-1"
	var made string
	for _, parent := range []string{filepath.Join(cgroupRoot, "pids"), cgroupRoot, filepath.Join(cgroupRoot, "unified")} {
		d := filepath.Join(parent, "sandboxtest-parent", id)
		if err := os.MkdirAll(d, 0o755); err == nil {
			made = d
			break
		}
	}
	if made == "" {
		t.Skip("cannot create a cgroup here (not root, or no writable hierarchy)")
	}
	defer func() {
		os.Remove(made)
		os.Remove(filepath.Dir(made))
	}()
	start := time.Now()
	found := cgroupsNamed(id)
	t.Logf("scan took %v", time.Since(start))
	if len(found) != 1 || found[0] != made {
		t.Errorf("cgroupsNamed = %v, want [%s]", found, made)
	}
	if got := cgroupsNamed(id + "2"); len(got) != 0 {
		t.Errorf("cgroupsNamed of another id = %v", got)
	}
}

func TestHostMounts(t *testing.T) {
	m := hostMounts("/proc")
	if len(m) == 0 {
		t.Skip("no /proc mount in this mount namespace")
	}
	if len(hostMounts("/no/such/path/sandboxtest")) != 0 {
		t.Error("mounts found for a path that is not mounted")
	}
}

// TestDocMentionsEveryCheck keeps the package documentation's list of
// checks complete.
func TestDocMentionsEveryCheck(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range Checks() {
		if !strings.Contains(string(doc), n) {
			t.Errorf("doc.go does not describe check %s", n)
		}
	}
}
