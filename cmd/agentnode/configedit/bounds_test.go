package configedit

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/reason"
)

// Values in range with their units, and an honest message for each of the
// reported ones.
func TestLimitRanges(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		want       string
	}{
		{"cpus", `1e-9`, `sandbox.limits.cpus: 1e-09 is below the minimum 0.01`},
		{"cpus", `2000`, `sandbox.limits.cpus: 2000 is above the maximum 1024`},
		{"memory", `"1k"`, `sandbox.limits.memory: "1k" is 1 KiB, below the minimum 16m (16 MiB)`},
		{"tmp_size", `"512k"`, `sandbox.limits.tmp_size: "512k" is 512 KiB, below the minimum 1m (1 MiB)`},
		{"pids", `256.0`, `sandbox.limits.pids: 256.0 is not an integer: write integers without a fraction or exponent (256)`},
		{"pids", `2.56e2`, `sandbox.limits.pids: 2.56e2 is not an integer`},
		{"pids", `0`, `sandbox.limits.pids: 0 is below the minimum 1`},
	} {
		path := setUp(t)
		data := readFile(t, path)
		re := regexp.MustCompile(`"` + tc.key + `": [^,\n]*`)
		if !re.Match(data) {
			t.Fatalf("no %s in the setup config", tc.key)
		}
		writeFile(t, path, string(re.ReplaceAll(data, []byte(`"`+tc.key+`": `+tc.value))))
		_, err := config.Load(path)
		if !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: err = %v\nwant %q", tc.key, tc.value, err, tc.want)
		}
	}
	// The minimums themselves are valid.
	path := setUp(t)
	for k, v := range map[string]string{"sandbox.limits.cpus": "0.01", "sandbox.limits.memory": "16m", "sandbox.limits.tmp_size": "1m"} {
		if err := Set(path, k, v); err != nil {
			t.Errorf("set %s %s: %v", k, v, err)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
