package manifest

import (
	"errors"
	"os"
	"path/filepath"
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
