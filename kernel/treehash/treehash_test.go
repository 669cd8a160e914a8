package treehash

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/agentnode/agentnode/kernel/hashcache"
)

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// tree makes a tree whose walk order and byte order differ ("a/b" is
// walked before "a-c", sorted after it).
func tree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"a", "a/b", "a-c", "z"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{"a/b/f": "hello", "a-c/x": "x", "a.b": ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, mode := range map[string]os.FileMode{"a-c/x": 0o755 | os.ModeSetuid, "z": 0o755 | os.ModeSticky} {
		if err := os.Chmod(filepath.Join(dir, p), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../a-c/x", filepath.Join(dir, "a/m")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestContentVector: the digest recorded in installed packages, lockfiles
// and attestations. It must never change for this tree (specs/store.md).
func TestContentVector(t *testing.T) {
	dir := tree(t)
	// Sorted: a, a-c, a-c/x, a.b, a/b, a/b/f, a/m, z.
	stream := "agentnode-content-v1\x00" +
		"d\x00a\x00\x00" +
		"d\x00a-c\x00\x00" +
		"f\x00a-c/x\x00x" + sha("x") + "\x00" +
		"f\x00a.b\x00-" + sha("") + "\x00" +
		"d\x00a/b\x00\x00" +
		"f\x00a/b/f\x00-" + sha("hello") + "\x00" +
		"l\x00a/m\x00../a-c/x\x00" +
		"d\x00z\x00\x00"
	const recorded = "sha256:5782643edc8eab53cde8c47920a7eac36372032e0ba8dc99a7e37d070b46259b"
	if "sha256:"+sha(stream) != recorded {
		t.Fatalf("the spelled-out stream hashes to %s, recorded %s", sha(stream), recorded)
	}
	got, err := Hash(dir, Content, Options{})
	if err != nil || got != recorded {
		t.Fatalf("Hash = %s, %v; want %s", got, err, recorded)
	}
}

// With a cache (kernel/hashcache), a file whose stamps match an entry is
// not read: a digest planted under the exact stamps of a/b/f is what is
// hashed. Once the file is written again (the same bytes: only its ctime
// changes), the entry no longer matches and the file is read.
func TestCache(t *testing.T) {
	old := hashcache.Settle
	hashcache.Settle = 0
	t.Cleanup(func() { hashcache.Settle = old })
	for _, f := range []Format{Content, Rootfs} {
		dir := tree(t)
		want, err := Hash(dir, f, Options{})
		if err != nil {
			t.Fatal(err)
		}
		cache := hashcache.Open(filepath.Join(t.TempDir(), "hashes.json"))
		if got, err := Hash(dir, f, Options{Cache: cache}); err != nil || got != want {
			t.Fatalf("format %d: Hash with a cache = %s, %v; want %s", f, got, err, want)
		}
		file := filepath.Join(dir, "a", "b", "f")
		fi, err := os.Lstat(file)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := hashcache.StampOf(fi)
		if _, ok := cache.Lookup(file, st); !ok {
			t.Fatalf("format %d: Hash did not record %s in the cache", f, file)
		}
		planted := sha256.Sum256([]byte("planted"))
		cache.Add(file, st, st, time.Now(), planted[:])
		if got, err := Hash(dir, f, Options{Cache: cache}); err != nil || got == want {
			t.Fatalf("format %d: Hash = %s, %v: the planted digest was not used", f, got, err)
		}
		time.Sleep(10 * time.Millisecond) // a ctime tick on coarse clocks
		if err := os.WriteFile(file, []byte("hello"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := Hash(dir, f, Options{Cache: cache}); err != nil || got != want {
			t.Fatalf("format %d: after the rewrite Hash = %s, %v; want %s (read again)", f, got, err, want)
		}
	}
}

// TestRootfsFormat: walk order, the root included, owners and the full
// mode bits.
func TestRootfsFormat(t *testing.T) {
	dir := tree(t)
	rec := func(p, kind, value string) string {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(dir, p), &st); err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, f := range []string{p, kind, strconv.FormatUint(uint64(st.Mode)&0o7777, 8),
			strconv.FormatUint(uint64(st.Uid), 10), strconv.FormatUint(uint64(st.Gid), 10), value} {
			out += f + "\x00"
		}
		return out
	}
	stream := rec(".", "d", "") +
		rec("a", "d", "") +
		rec("a/b", "d", "") +
		rec("a/b/f", "f", "5:"+sha("hello")) +
		rec("a/m", "l", "../a-c/x") +
		rec("a-c", "d", "") +
		rec("a-c/x", "f", "1:"+sha("x")) +
		rec("a.b", "f", "0:"+sha("")) +
		rec("z", "d", "")
	got, err := Hash(dir, Rootfs, Options{})
	if err != nil || got != "sha256:"+sha(stream) {
		t.Fatalf("Hash = %s, %v; want sha256:%s", got, err, sha(stream))
	}
	// The setuid bit is part of it, not of the content hash.
	c1, _ := Hash(dir, Content, Options{})
	if err := os.Chmod(filepath.Join(dir, "a-c/x"), 0o755); err != nil {
		t.Fatal(err)
	}
	c2, _ := Hash(dir, Content, Options{})
	if r, _ := Hash(dir, Rootfs, Options{}); r == got || c1 != c2 {
		t.Fatalf("setuid dropped: rootfs %s (was %s), content %s (was %s)", r, got, c2, c1)
	}
}

func TestHashRefuses(t *testing.T) {
	for _, f := range []Format{Content, Rootfs} {
		dir := tree(t)
		if err := syscall.Mkfifo(filepath.Join(dir, "a", "p"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Hash(dir, f, Options{}); err == nil {
			t.Errorf("format %d hashed a fifo", f)
		}
		checkErr := errors.New("refused by check")
		var checked []string
		_, err := Hash(dir, f, Options{Check: func(_ *os.Root, p string, info fs.FileInfo) error {
			checked = append(checked, p)
			if info.Mode()&fs.ModeNamedPipe != 0 {
				return checkErr
			}
			return nil
		}})
		if !errors.Is(err, checkErr) || len(checked) == 0 || checked[0] == "." {
			t.Errorf("format %d: Check saw %v, Hash = %v", f, checked, err)
		}
		if _, err := Hash(filepath.Join(dir, "missing"), f, Options{}); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("format %d, missing dir: %v", f, err)
		}
		if _, err := Hash(filepath.Join(dir, "a.b"), f, Options{}); err == nil {
			t.Errorf("format %d hashed a file as a tree", f)
		}
	}
}

// TestSkip: a skipped directory is left out with everything below it (the
// hash equals the tree's without it, whatever it holds, even a special
// file Check would refuse); a skipped file is left out; nothing else is.
func TestSkip(t *testing.T) {
	plain := tree(t)
	want, err := Hash(plain, Content, Options{})
	if err != nil {
		t.Fatal(err)
	}
	withDeps := tree(t)
	deps := filepath.Join(withDeps, ".deps")
	if err := os.MkdirAll(filepath.Join(deps, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deps, "lib", "m.py"), []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(deps, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	skipDeps := func(p string, _ fs.FileInfo) bool { return p == ".deps" }
	refuseSpecial := func(_ *os.Root, p string, info fs.FileInfo) error {
		if !info.Mode().IsDir() && !info.Mode().IsRegular() && info.Mode()&fs.ModeSymlink == 0 {
			return errors.New(p + " is special")
		}
		return nil
	}
	got, err := Hash(withDeps, Content, Options{Skip: skipDeps, Check: refuseSpecial})
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("with .deps skipped: %s, want the tree's %s", got, want)
	}
	if _, err := Hash(withDeps, Content, Options{Check: refuseSpecial}); err == nil {
		t.Fatal("without Skip the fifo below .deps was not checked")
	}
	// Skipping a file; a skip of a name that is only a prefix leaves the
	// rest in.
	got, err = Hash(plain, Content, Options{Skip: func(p string, _ fs.FileInfo) bool { return p == "a.b" }})
	if err != nil {
		t.Fatal(err)
	}
	if got == want {
		t.Fatal("skipping a.b did not change the hash")
	}
	got, err = Hash(plain, Content, Options{Skip: func(p string, _ fs.FileInfo) bool { return p == "a-" }})
	if err != nil || got != want {
		t.Fatalf("skipping a name that is not there changed the hash: %s %v", got, err)
	}
}
