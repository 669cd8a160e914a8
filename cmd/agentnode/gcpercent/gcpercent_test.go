package gcpercent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// agentnode initializes this package before jsonschema compiles its
// meta-schemas (the bulk of initialization's allocations), and with the
// target set then, `agentnode version` runs without a single collection.
func TestSetBeforeTheHeavyInitialization(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "agentnode")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/agentnode/agentnode/cmd/agentnode").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "version")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GODEBUG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GODEBUG=inittrace=1,gctrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agentnode version: %v\n%s", err, out)
	}
	trace := string(out)
	own := strings.Index(trace, "init github.com/agentnode/agentnode/cmd/agentnode/gcpercent @")
	heavy := strings.Index(trace, "init github.com/santhosh-tekuri/jsonschema/v6 @")
	if own < 0 || heavy < 0 || own > heavy {
		t.Fatalf("gcpercent initialized at offset %d, jsonschema at %d; want gcpercent first:\n%s", own, heavy, trace)
	}
	for _, line := range strings.Split(trace, "\n") {
		if strings.HasPrefix(line, "gc ") {
			t.Errorf("a collection during `agentnode version`: %s", line)
		}
	}
}
