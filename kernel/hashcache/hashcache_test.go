package hashcache

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// settled lets every file count as settled for the test.
func settled(t *testing.T) {
	t.Helper()
	old := Settle
	Settle = 0
	t.Cleanup(func() { Settle = old })
}

// helloFile writes "hello" to a file f in a new directory.
func helloFile(t *testing.T) (dir, file string) {
	t.Helper()
	dir = t.TempDir()
	file = filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

func sum(t *testing.T, c *Cache, path string) (got []byte, hashed bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, hashed, err = c.Sum(f, path)
	if err != nil {
		t.Fatal(err)
	}
	c.Flush()
	return got, hashed
}

func TestSumIsCachedUntilTheFileChanges(t *testing.T) {
	settled(t)
	dir, file := helloFile(t)
	cachePath := filepath.Join(dir, "state", "hashes.json")
	want := sha256.Sum256([]byte("hello"))

	got, hashed := sum(t, Open(cachePath), file)
	if !hashed || !bytes.Equal(got, want[:]) {
		t.Fatalf("first sum %x hashed=%v, want %x hashed", got, hashed, want)
	}
	fi, err := os.Stat(cachePath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file: %v %v", fi, err)
	}
	// A new Cache (another process) reads the entry and does not hash.
	got, hashed = sum(t, Open(cachePath), file)
	if hashed || !bytes.Equal(got, want[:]) {
		t.Fatalf("second sum %x hashed=%v, want %x from the cache", got, hashed, want)
	}
}

// An attacker who rewrites a file in place with the same size and puts
// its mtime back still changes its ctime: the cache does not vouch.
func TestSameSizeRewriteWithRestoredMtimeIsHashedAgain(t *testing.T) {
	settled(t)
	dir, file := helloFile(t)
	cachePath := filepath.Join(dir, "hashes.json")
	sum(t, Open(cachePath), file)
	fi, _ := os.Stat(file)
	time.Sleep(10 * time.Millisecond) // a ctime tick on coarse clocks
	if err := os.WriteFile(file, []byte("HELLO"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(file, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	got, hashed := sum(t, Open(cachePath), file)
	want := sha256.Sum256([]byte("HELLO"))
	if !hashed || !bytes.Equal(got, want[:]) {
		t.Fatalf("after the rewrite: %x hashed=%v, want %x hashed again", got, hashed, want)
	}
}

// A file replaced by another (rename over it) has another inode.
func TestReplacedFileIsHashedAgain(t *testing.T) {
	settled(t)
	dir, file := helloFile(t)
	cachePath := filepath.Join(dir, "hashes.json")
	sum(t, Open(cachePath), file)
	other := filepath.Join(dir, "g")
	if err := os.WriteFile(other, []byte("other"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, file); err != nil {
		t.Fatal(err)
	}
	got, hashed := sum(t, Open(cachePath), file)
	want := sha256.Sum256([]byte("other"))
	if !hashed || !bytes.Equal(got, want[:]) {
		t.Fatalf("after the replace: %x hashed=%v, want %x", got, hashed, want)
	}
}

// An entry for other stamps than the file's is not believed, and a corrupt
// cache file is ignored.
func TestEntriesMustMatchTheStamps(t *testing.T) {
	settled(t)
	dir, file := helloFile(t)
	cachePath := filepath.Join(dir, "hashes.json")
	sum(t, Open(cachePath), file)
	m := Read(cachePath)
	e := m[file]
	e.Ino++
	m[file] = e
	if err := Write(cachePath, m); err != nil {
		t.Fatal(err)
	}
	if _, hashed := sum(t, Open(cachePath), file); !hashed {
		t.Fatal("an entry for another inode spared the hash")
	}
	if err := os.WriteFile(cachePath, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, hashed := sum(t, Open(cachePath), file); !hashed {
		t.Fatal("a corrupt cache was believed")
	}
}

// A file changed less than Settle before it was hashed is not recorded:
// a later change within the same ctime tick could keep its stamps.
func TestUnsettledFilesAreNotRecorded(t *testing.T) {
	old := Settle
	Settle = time.Hour
	t.Cleanup(func() { Settle = old })
	dir, file := helloFile(t)
	cachePath := filepath.Join(dir, "hashes.json")
	for i := 0; i < 2; i++ {
		if _, hashed := sum(t, Open(cachePath), file); !hashed {
			t.Fatalf("sum %d came from the cache", i)
		}
	}
	if _, ok := Read(cachePath)[file]; ok {
		t.Fatal("an unsettled file was recorded")
	}
}

// Flush keeps entries another process wrote meanwhile and drops files that
// no longer exist.
func TestFlushMergesAndPrunes(t *testing.T) {
	settled(t)
	dir := t.TempDir()
	a, b, gone := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "gone")
	for _, f := range []string{a, b, gone} {
		if err := os.WriteFile(f, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cachePath := filepath.Join(dir, "hashes.json")
	sum(t, Open(cachePath), gone)
	c1, c2 := Open(cachePath), Open(cachePath)
	c1.Lookup(a, Stamp{}) // both load the file now, before either adds
	c2.Lookup(b, Stamp{})
	sum(t, c1, a)
	sum(t, c2, b)
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	sum(t, Open(cachePath), a) // cached: no flush needed
	c3 := Open(cachePath)
	c3.Lookup(a, Stamp{})
	c3.dirty = true
	c3.Flush()
	m := Read(cachePath)
	if _, ok := m[a]; !ok {
		t.Error("entry a lost")
	}
	if _, ok := m[b]; !ok {
		t.Error("entry b lost (another process's entry overwritten)")
	}
	if _, ok := m[gone]; ok {
		t.Error("entry for a deleted file kept")
	}
}

func TestNilCacheHashes(t *testing.T) {
	_, file := helloFile(t)
	var c *Cache
	for i := 0; i < 2; i++ {
		got, hashed := sum(t, c, file)
		want := sha256.Sum256([]byte("hello"))
		if !hashed || !bytes.Equal(got, want[:]) {
			t.Fatalf("nil cache: %x hashed=%v", got, hashed)
		}
	}
}

// The file format round-trips any path (spaces, newlines, non-UTF-8), and
// a file that is not a whole well-formed cache is no cache at all.
func TestFormatRoundTripAndRejects(t *testing.T) {
	digest := strings.Repeat("ab", sha256.Size)
	m := map[string]Entry{
		"/a":                  {Stamp{Dev: 1, Ino: 2, Size: 3, MtimeNS: -4, CtimeNS: 1796315861109534073}, digest},
		"/dir/with space":     {Stamp{Dev: 18446744073709551615, Ino: 9}, digest},
		"/new\nline \xff\x01": {Stamp{Size: 1 << 40}, digest},
	}
	data, err := format(m)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := parse(string(data))
	if !ok || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: %v %v\n%q", got, ok, data)
	}
	if _, err := format(map[string]Entry{"/nul\x00": {SHA256: digest}}); err == nil {
		t.Error("a path with NUL was written")
	}
	if _, err := format(map[string]Entry{"/short": {SHA256: "ab"}}); err == nil {
		t.Error("a short digest was written")
	}
	empty, err := format(nil)
	if m, ok := parse(string(empty)); err != nil || !ok || len(m) != 0 {
		t.Errorf("empty cache: %q %v %v", empty, m, ok)
	}
	rec := digest + " 1 2 3 4 5 /p\x00"
	for name, bad := range map[string]string{
		"no header":        rec,
		"other version":    "agentnode-hashcache-v2\n" + rec,
		"json":             `{"/p":{"dev":1}}`,
		"truncated":        header + rec[:len(rec)-1],
		"missing field":    header + digest + " 1 2 3 4 /p\x00",
		"empty path":       header + digest + " 1 2 3 4 5 \x00",
		"not a number":     header + digest + " 1 2 x 4 5 /p\x00",
		"negative inode":   header + digest + " 1 -2 3 4 5 /p\x00",
		"short digest":     header + digest[2:] + " 1 2 3 4 5 /p\x00",
		"duplicate":        header + rec + rec,
		"trailing garbage": header + rec + "x",
	} {
		if m, ok := parse(bad); ok || m != nil {
			t.Errorf("%s: parsed as %v", name, m)
		}
	}
}

// TestShared: one Cache per file in a process, and a file changed after a
// shared cache recorded it is still hashed again.
func TestShared(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if Shared(a) != Shared(a) || Shared(a) == Shared(b) || Shared(a) == Open(a) {
		t.Fatal("Shared must give one cache per path, apart from Open's")
	}
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	st := stampOf(t, f)
	Shared(a).Add(f, st, st, time.Unix(0, st.CtimeNS).Add(Settle), []byte("0123456789abcdef0123456789abcdef"))
	if _, ok := Shared(a).Lookup(f, st); !ok {
		t.Fatal("the shared cache lost its entry")
	}
	if err := os.WriteFile(f, []byte("three"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := Shared(a).Lookup(f, stampOf(t, f)); ok {
		t.Fatal("a changed file matched the shared cache's entry")
	}
}

func stampOf(t *testing.T, name string) Stamp {
	t.Helper()
	fi, err := os.Lstat(name)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := StampOf(fi)
	if !ok {
		t.Fatal("no stamp")
	}
	return st
}
