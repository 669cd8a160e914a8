package manifest

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// FuzzParse feeds manifests to the whole of parse (YAML bounds and parse,
// schema validation, decoding, checks) with the hostile cases of the attack
// suite as seeds. It must never panic, and what it allocates must stay
// within a bound linear in the input: 32 MiB plus 512 bytes per input byte
// (a 1 MiB manifest: 544 MiB at most; the deep attacks are refused having
// allocated almost nothing).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		flatManifest,
		strings.Repeat("- ", 400000) + "x\n",
		strings.Repeat("[", 200000) + strings.Repeat("]", 200000) + "\n",
		strings.Repeat("- ", 50000) + "x\n",
		strings.Replace(flatManifest, "input_schema: {type: object}",
			"input_schema: "+strings.Repeat("{not: ", 80)+"{}"+strings.Repeat("}", 80), 1),
		flatManifest + "description: \"caf\xe9\"\n",
		flatManifest + "description: a\x00b\n",
		flatManifest + "description: !!binary wP8=\n",
		flatManifest + "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n",
		anp01Toolpack, anp02Toolpack, llmOnlyAgent, orchestratorAgent, fixtureToolpack,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "echo"), []byte("#!/bin/sh\ncat\n"), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > MaxSize {
			return
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m, problems := parse(data, nil, dir, true)
		runtime.ReadMemStats(&after)
		if (m == nil) == (len(problems) == 0) {
			t.Fatalf("manifest %v with problems %v", m != nil, problems)
		}
		if used, bound := after.TotalAlloc-before.TotalAlloc, uint64(32<<20+512*len(data)); used > bound {
			t.Fatalf("%d bytes allocated for %d bytes of manifest (bound %d)", used, len(data), bound)
		}
	})
}
