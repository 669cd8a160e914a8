package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/validcache"
)

// LoadCached validates a manifest once and remembers it; the verdict is
// consulted for the schema part only (planted for a manifest that breaks
// the schema, it is believed), while the package directory is checked
// every time.
func TestLoadCachedSkipsOnlyTheSchemaPart(t *testing.T) {
	cache := validcache.Open(filepath.Join(t.TempDir(), "valid"))
	text := toYAML(t, baseManifest())
	dir := packageDir(t, text)
	if _, err := LoadCached(dir, cache); err != nil {
		t.Fatal(err)
	}
	if !cache.Valid(verdictKind, []byte(text)) {
		t.Fatal("a valid manifest was not remembered")
	}
	if _, err := LoadCached(dir, cache); err != nil {
		t.Fatalf("second load: %v", err)
	}

	// The entrypoint is removed: refused although the bytes are known.
	if err := os.Remove(filepath.Join(dir, "bin", "echo")); err != nil {
		t.Fatal(err)
	}
	_, err := LoadCached(dir, cache)
	var me *Error
	if !errors.As(err, &me) {
		t.Fatalf("LoadCached with the entrypoint gone = %v, want a manifest error", err)
	}
	wantProblem(t, me, "capabilities.tools[0].entrypoint", "does not exist")

	// A schema violation the decoder tolerates (an unknown top-level
	// field): refused and not remembered; with a planted verdict it is
	// believed, which shows the verdict is what spares the validation.
	m := baseManifest()
	m["unknown_field"] = 1
	bad := toYAML(t, m)
	dir = packageDir(t, bad)
	if _, err := LoadCached(dir, cache); err == nil {
		t.Fatal("a manifest with an unknown field loaded")
	}
	if cache.Valid(verdictKind, []byte(bad)) {
		t.Fatal("an invalid manifest was remembered")
	}
	cache.Remember(verdictKind, []byte(bad))
	if _, err := LoadCached(dir, cache); err != nil {
		t.Fatalf("with a planted verdict LoadCached still validated the schema: %v", err)
	}
	if _, err := Load(dir); err == nil {
		t.Fatal("Load consulted a cache")
	}
}

// The verdict keeps the manifest's conversion to JSON, and LoadCached
// decodes that instead of the YAML: the result is the one Load gives. A
// planted conversion is believed (the cache is as trusted as the store
// next to it), which shows it is what is used; one that does not decode
// (a damaged cache) is not, and the manifest itself is loaded and its
// conversion kept again.
func TestLoadCachedDecodesTheKeptConversion(t *testing.T) {
	cache := validcache.Open(filepath.Join(t.TempDir(), "valid"))
	text := toYAML(t, baseManifest())
	dir := packageDir(t, text)
	want, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCached(dir, cache); err != nil {
		t.Fatal(err)
	}
	kept, ok := cache.Kept(verdictKind, []byte(text))
	if !ok || !bytes.Equal(kept, want.Raw) {
		t.Fatalf("kept %q, want the conversion %q", kept, want.Raw)
	}
	got, err := LoadCached(dir, cache)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("from the kept conversion:\n%+v\nwant\n%+v", got, want)
	}

	planted := bytes.Replace(want.Raw, []byte(`"summary":"`), []byte(`"summary":"planted `), 1)
	cache.Keep(verdictKind, planted, []byte(text))
	if got, err := LoadCached(dir, cache); err != nil || !strings.HasPrefix(got.Summary, "planted ") {
		t.Fatalf("with a planted conversion: %v, %v", got, err)
	}

	cache.Keep(verdictKind, want.Raw[:len(want.Raw)/2], []byte(text))
	got, err = LoadCached(dir, cache)
	if err != nil {
		t.Fatalf("with a damaged conversion: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("with a damaged conversion:\n%+v\nwant\n%+v", got, want)
	}
	if kept, _ := cache.Kept(verdictKind, []byte(text)); !bytes.Equal(kept, want.Raw) {
		t.Fatalf("after a damaged conversion, kept %q", kept)
	}
}

// Tools that share an entrypoint are checked once, and a problem with it
// is still reported at every tool that names it.
func TestSharedEntrypointProblemIsReportedPerTool(t *testing.T) {
	m := baseManifest()
	tools := m["capabilities"].(map[string]any)["tools"].([]any)
	ok := tools[0].(map[string]any)
	var more []any
	for i, ep := range []string{"bin/data.txt", "bin/echo", "bin/data.txt"} {
		tool := map[string]any{}
		for k, v := range ok {
			tool[k] = v
		}
		tool["name"], tool["entrypoint"] = fmt.Sprintf("t%d", i), ep
		more = append(more, tool)
	}
	m["capabilities"].(map[string]any)["tools"] = append(tools, more...)
	_, err := LoadCached(packageDir(t, toYAML(t, m)), validcache.Open(filepath.Join(t.TempDir(), "valid")))
	var me *Error
	if !errors.As(err, &me) || len(me.Problems) != 2 {
		t.Fatalf("LoadCached = %v; want the two tools with a non-executable entrypoint", err)
	}
	wantProblem(t, me, "capabilities.tools[1].entrypoint", "not executable")
	wantProblem(t, me, "capabilities.tools[3].entrypoint", "not executable")
}
