package validcache

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
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

// Keep stores a value with the verdict and Kept returns it, exactly; a
// later Keep replaces it whole; Remember's verdict keeps nothing; no
// temporary file is left behind.
func TestKeptIsWhatWasKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "valid")
	c := Open(dir)
	doc := []byte("a: 1")
	if v, ok := c.Kept("yaml", doc); ok || v != nil {
		t.Fatalf("Kept before Keep = %q, %v", v, ok)
	}
	c.Keep("yaml", []byte(`{"a":1}`), doc)
	if v, ok := c.Kept("yaml", doc); !ok || string(v) != `{"a":1}` {
		t.Fatalf("Kept = %q, %v; want the kept value", v, ok)
	}
	if !c.Valid("yaml", doc) {
		t.Fatal("a kept verdict is not Valid")
	}
	c.Keep("yaml", []byte(`{"a":2}`), doc)
	if v, _ := Open(dir).Kept("yaml", doc); string(v) != `{"a":2}` {
		t.Fatalf("Kept after a second Keep = %q", v)
	}
	if v, ok := c.Kept("yaml", []byte("a: 2")); ok {
		t.Fatalf("Kept for other bytes = %q", v)
	}
	c.Remember("other", doc)
	if v, ok := c.Kept("other", doc); !ok || len(v) != 0 {
		t.Fatalf("Kept after Remember = %q, %v; want an empty verdict", v, ok)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 2 {
		t.Fatalf("%d entries in the cache, want the 2 verdicts", len(ents))
	}
}

// A FIFO in place of a verdict is no verdict, and reading it does not
// block; a value over MaxKept is not kept.
func TestKeptRefusesSpecialFilesAndHugeValues(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "valid")
	c := Open(dir)
	doc := []byte("x")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, key("k", [][]byte{doc})), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Kept("k", doc); ok {
		t.Fatal("a FIFO in place of a verdict counted")
	}
	c.Keep("big", make([]byte, MaxKept+1), doc)
	if _, ok := c.Kept("big", doc); ok {
		t.Fatal("a value over MaxKept was kept")
	}
}
