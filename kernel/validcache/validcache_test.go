package validcache

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestRememberedVerdictsAreExact(t *testing.T) {
	c := Open(filepath.Join(t.TempDir(), "valid"))
	doc := []byte(`{"a":1}`)
	if c.Valid("config", doc) {
		t.Fatal("valid before anything was remembered")
	}
	c.Remember("config", doc)
	if !c.Valid("config", doc) {
		t.Fatal("not valid after Remember")
	}
	// Another cache on the same directory (another process) agrees.
	if !Open(c.dir).Valid("config", doc) {
		t.Fatal("the verdict did not persist")
	}
	for name, tc := range map[string]struct {
		kind  string
		parts [][]byte
	}{
		"one byte changed":   {"config", [][]byte{[]byte(`{"a":2}`)}},
		"other kind":         {"manifest", [][]byte{doc}},
		"split differently":  {"config", [][]byte{[]byte(`{"a"`), []byte(`:1}`)}},
		"extra part":         {"config", [][]byte{doc, nil}},
		"kind/part boundary": {"confi", [][]byte{[]byte(`g{"a":1}`)}},
	} {
		if c.Valid(tc.kind, tc.parts...) {
			t.Errorf("%s: counted as valid", name)
		}
	}
}

func TestVerdictIsBoundToTheBinary(t *testing.T) {
	c := Open(filepath.Join(t.TempDir(), "valid"))
	doc := []byte("x")
	c.Remember("k", doc)
	k1 := key("k", [][]byte{doc})
	// Another binary (stamp) gives another key for the same document.
	saved := exeStamp
	t.Cleanup(func() { exeStamp = saved })
	exeStamp = func() []byte { return []byte("another binary") }
	if key("k", [][]byte{doc}) == k1 {
		t.Fatal("the key does not depend on the binary")
	}
	if c.Valid("k", doc) {
		t.Fatal("a verdict of another binary counted")
	}
	// Without an identifiable binary nothing is cached.
	exeStamp = func() []byte { return nil }
	c.Remember("k", doc)
	if c.Valid("k", doc) {
		t.Fatal("a verdict was kept without a binary stamp")
	}
}

func TestOnlyRegularFilesCount(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "valid")
	c := Open(dir)
	doc := []byte("x")
	if err := os.MkdirAll(filepath.Join(dir, key("k", [][]byte{doc})), 0o700); err != nil {
		t.Fatal(err)
	}
	if c.Valid("k", doc) {
		t.Fatal("a directory in place of a verdict counted")
	}
}

func TestNilAndUnwritableCachesRememberNothing(t *testing.T) {
	var c *Cache
	c.Remember("k", []byte("x"))
	if c.Valid("k", []byte("x")) {
		t.Fatal("nil cache remembered")
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c = Open(filepath.Join(file, "valid")) // under a regular file: cannot be created
	c.Remember("k", []byte("x"))
	if c.Valid("k", []byte("x")) {
		t.Fatal("unwritable cache remembered")
	}
}

func TestPruneKeepsTheNewest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "valid")
	c := Open(dir)
	for i := 0; i <= MaxEntries; i++ {
		c.Remember("k", []byte(fmt.Sprint(i)))
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) > MaxEntries/2+1 {
		t.Fatalf("%d entries after pruning, want at most %d", len(ents), MaxEntries/2+1)
	}
	if !c.Valid("k", []byte(fmt.Sprint(MaxEntries))) {
		t.Fatal("the newest verdict was pruned")
	}
}
