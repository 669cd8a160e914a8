package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// FuzzLoad runs config files through Load (file checks, depth bound, strict
// decoding, schema and semantic checks, conversion) with the hostile cases
// of the attack suite as seeds: it must never panic, and a file it accepts
// must hold limits in range.
func FuzzLoad(f *testing.F) {
	valid, err := json.MarshalIndent(Defaults(), "", "  ") // what setup writes
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	for key, value := range map[string]string{"cpus": "1e-9", "memory": `"1k"`, "pids": "256.0", "tmp_size": `"0k"`} {
		re := regexp.MustCompile(`"` + key + `": [^,\n]*`)
		f.Add(re.ReplaceAll(valid, []byte(`"`+key+`": `+value)))
	}
	f.Add([]byte(`{"trust":` + strings.Repeat(`{"a":`, 20000) + `1` + strings.Repeat(`}`, 20001)))
	f.Add([]byte(strings.Repeat(`[`, 100000)))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > MaxFileSize {
			return
		}
		p := filepath.Join(t.TempDir(), "config.json")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(p)
		if err != nil {
			return
		}
		l := c.Sandbox.Limits
		mem, merr := l.MemoryBytes()
		if l.CPUs < 0.01 || l.CPUs > 1024 || l.Pids < 1 || merr != nil || mem < MinMemory {
			t.Fatalf("accepted limits out of range: %+v", l)
		}
	})
}
