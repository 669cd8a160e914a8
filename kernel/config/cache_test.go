package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/validcache"
)

// LoadCached validates a config once; its verdict is consulted (shown by
// planting one for an invalid file), and any edit without a verdict is
// validated in full again.
func TestLoadCachedRemembersAndRevalidatesEdits(t *testing.T) {
	path := setUp(t)
	cache := validcache.Open(filepath.Join(t.TempDir(), "valid"))
	if _, err := LoadCached(path, cache); err != nil {
		t.Fatal(err)
	}
	if !cache.Valid(verdictKind, readFile(t, path)) {
		t.Fatal("a valid config was not remembered")
	}
	if _, err := LoadCached(path, cache); err != nil {
		t.Fatalf("second load: %v", err)
	}

	// An edit makes the file invalid: validated again, and refused with
	// the key named.
	doc := strings.Replace(string(readFile(t, path)), `"strict": false`, `"strict": "no"`, 1)
	if doc == string(readFile(t, path)) {
		t.Fatal("test config has no \"strict\": false to edit")
	}
	writeFile(t, path, doc)
	_, err := LoadCached(path, cache)
	if !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), "strict") {
		t.Fatalf("edited invalid config = %v, want config_invalid naming strict", err)
	}
	if cache.Valid(verdictKind, []byte(doc)) {
		t.Fatal("an invalid config was remembered")
	}
	// A planted verdict is believed (the cache is as trusted as the
	// config): proof that LoadCached consults it rather than validating.
	// An unknown key fails only the schema, not the decoding.
	doc = strings.Replace(string(readFile(t, path)), `"strict": "no"`, `"strict": false, "bogus_key": 1`, 1)
	writeFile(t, path, doc)
	if _, err := LoadCached(path, cache); !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), "bogus_key") {
		t.Fatalf("config with an unknown key = %v, want config_invalid naming it", err)
	}
	cache.Remember(verdictKind, []byte(doc))
	if _, err := LoadCached(path, cache); err != nil {
		t.Fatalf("with a planted verdict LoadCached still validated: %v", err)
	}
	// Load never consults a cache.
	if _, err := Load(path); !errors.Is(err, reason.ErrConfigInvalid) {
		t.Fatalf("Load of the invalid config = %v", err)
	}
}

// Peek reads the plugin names with Load's file checks but no validation.
func TestPeek(t *testing.T) {
	path := setUp(t)
	p, ok := Peek(path)
	if !ok || p.Trust != "attest" || len(p.Inspectors) != 1 || p.Inspectors[0] != "builtin" {
		t.Fatalf("Peek of the defaults = %+v, %v", p, ok)
	}
	// Not validated: a config the schema refuses still names its plugins.
	doc := strings.Replace(string(readFile(t, path)), `"strict": false`, `"strict": "no"`, 1)
	writeFile(t, path, doc)
	if p, ok := Peek(path); !ok || p.Trust != "attest" {
		t.Fatalf("Peek of a schema-invalid config = %+v, %v", p, ok)
	}
	for name, content := range map[string]string{"not JSON": "{", "duplicate key": `{"trust":{},"trust":{}}`} {
		writeFile(t, path, content)
		if p, ok := Peek(path); ok {
			t.Errorf("%s: Peek = %+v, ok", name, p)
		}
	}
	if _, ok := Peek(filepath.Dir(path)); ok {
		t.Error("Peek of a directory succeeded")
	}
}
