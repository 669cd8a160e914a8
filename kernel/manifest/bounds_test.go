package manifest

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The hostile manifests of the attack suite, refused before (or, for the
// escapes, right after) the YAML parser, each naming why.
func TestHostileManifests(t *testing.T) {
	base := flatManifest
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"deep block sequence", strings.Repeat("- ", 50000) + "x\n", "nested deeper than 64 levels (line 1)"},
		{"deep flow", strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "\n", "more than 200000 YAML tokens"},
		{"deep input_schema", strings.Replace(base, "input_schema: {type: object}",
			"input_schema: "+strings.Repeat("{not: ", 70)+"{}"+strings.Repeat("}", 70), 1), "nested deeper than 64 levels"},
		{"invalid UTF-8", base + "description: \"caf\xe9\"\n", "not valid UTF-8 (byte"},
		{"NUL byte", base + "description: a\x00b\n", "contains a NUL byte"},
		{"NUL escape", base + "description: \"a\\0b\"\n", "description: contains a NUL character"},
		{"binary", base + "description: !!binary wP8=\n", "YAML tag !!binary is not supported"},
		{"custom tag", base + "description: !evil x\n", "YAML tag !evil is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(packageDir(t, tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// A FIFO in place of agentnode.yaml is refused without waiting for a writer.
func TestManifestFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, FileName), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "manifest must be a regular file, not a special file") {
		t.Fatalf("err = %v", err)
	}
}

// A legal manifest with a moderately nested input schema (30 levels) loads.
func TestModeratelyNestedSchema(t *testing.T) {
	doc := strings.Replace(flatManifest, "input_schema: {type: object}",
		"input_schema: "+strings.Repeat("{not: ", 30)+"{}"+strings.Repeat("}", 30), 1)
	if _, err := Load(packageDir(t, doc)); err != nil {
		t.Fatal(err)
	}
}

// flatManifest is a valid manifest whose input schema is written in flow
// style on one line, for the tests to replace.
const flatManifest = `manifest_version: "0.2"
package_id: echo-pack
package_type: toolpack
name: Echo Pack
publisher: example
version: 1.2.3
summary: Echoes its input back.
runtime: exec
capabilities:
  tools:
    - name: echo
      description: Echo the input.
      entrypoint: bin/echo
      action_type: compute
      input_schema: {type: object}
permissions:
  network: {level: none}
  filesystem: {level: none}
  code_execution: {level: none}
`
