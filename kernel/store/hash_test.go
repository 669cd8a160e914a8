package store

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// makeTree writes a package-like tree (the hash does not read the
// manifest, so it has none): an executable, a data file, an empty
// directory and a symlink inside the tree.
func makeTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	mustMkdir(t, filepath.Join(dir, "bin"))
	mustWrite(t, filepath.Join(dir, "bin", "echo"), "#!/bin/sh\ncat\n", 0o755)
	mustMkdir(t, filepath.Join(dir, "data", "empty"))
	mustWrite(t, filepath.Join(dir, "data", "words.txt"), "hello 1.0.0\n", 0o640)
	if err := os.Symlink("../bin/echo", filepath.Join(dir, "data", "echo-link")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mustWrite(t *testing.T, name, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, mode); err != nil {
		t.Fatal(err)
	}
}

func mustMkdir(t *testing.T, name string) {
	t.Helper()
	if err := os.MkdirAll(name, 0o755); err != nil {
		t.Fatal(err)
	}
}

// copyDir copies a tree with fresh mtimes and without the non-exec
// permission bits, the way another checkout would look.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(target, 0o700)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		perm := fs.FileMode(0o600)
		if info.Mode().Perm()&0o111 != 0 {
			perm = 0o700
		}
		return os.WriteFile(target, data, perm)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func mustHash(t *testing.T, dir string) string {
	t.Helper()
	h, err := ContentHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestContentHashStableAcrossCopies(t *testing.T) {
	src := makeTree(t)
	h1 := mustHash(t, src)
	cp := copyDir(t, src)
	time.Sleep(10 * time.Millisecond)
	if err := os.Chtimes(filepath.Join(cp, "data", "words.txt"), time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(cp, "data", "words.txt"), 0o600); err != nil { // no exec bit either way
		t.Fatal(err)
	}
	if h2 := mustHash(t, cp); h1 != h2 || h1 != mustHash(t, src) {
		t.Fatalf("hash differs across copies: %s vs %s", h1, h2)
	}
}

func TestContentHashChanges(t *testing.T) {
	cases := map[string]func(t *testing.T, dir string){
		"content": func(t *testing.T, dir string) {
			mustWrite(t, filepath.Join(dir, "data", "words.txt"), "hello 1.0.1\n", 0o640)
		},
		"file name": func(t *testing.T, dir string) {
			if err := os.Rename(filepath.Join(dir, "data", "words.txt"), filepath.Join(dir, "data", "words.dat")); err != nil {
				t.Fatal(err)
			}
		},
		"exec bit (group only)": func(t *testing.T, dir string) {
			if err := os.Chmod(filepath.Join(dir, "data", "words.txt"), 0o650); err != nil {
				t.Fatal(err)
			}
		},
		"empty dir": func(t *testing.T, dir string) { mustMkdir(t, filepath.Join(dir, "new")) },
		"file moved to another dir": func(t *testing.T, dir string) {
			if err := os.Rename(filepath.Join(dir, "data", "words.txt"), filepath.Join(dir, "bin", "words.txt")); err != nil {
				t.Fatal(err)
			}
		},
		"symlink target": func(t *testing.T, dir string) {
			l := filepath.Join(dir, "data", "echo-link")
			_ = os.Remove(l)
			if err := os.Symlink("./../bin/echo", l); err != nil {
				t.Fatal(err)
			}
		},
		"symlink replaced by its file": func(t *testing.T, dir string) {
			l := filepath.Join(dir, "data", "echo-link")
			_ = os.Remove(l)
			mustWrite(t, l, "#!/bin/sh\ncat\n", 0o755)
		},
	}
	base := mustHash(t, makeTree(t))
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			dir := makeTree(t)
			if h := mustHash(t, dir); h != base {
				t.Fatalf("fresh tree hash %s != %s", h, base)
			}
			change(t, dir)
			if h := mustHash(t, dir); h == base {
				t.Fatal("hash did not change")
			}
		})
	}
}

// TestContentHashFormat pins the definition in specs/store.md by building
// the hashed byte stream by hand.
func TestContentHashFormat(t *testing.T) {
	dir := t.TempDir()
	mustMkdir(t, filepath.Join(dir, "a"))
	mustWrite(t, filepath.Join(dir, "a", "run"), "x", 0o755)
	mustWrite(t, filepath.Join(dir, "a-b"), "", 0o644)
	if err := os.Symlink("a/run", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	sha := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	// Byte order of the full path: "a" < "a-b" < "a/run" < "l".
	stream := "agentnode-content-v1\x00" +
		"d\x00a\x00\x00" +
		"f\x00a-b\x00-" + sha("") + "\x00" +
		"f\x00a/run\x00x" + sha("x") + "\x00" +
		"l\x00l\x00a/run\x00"
	if got, want := mustHash(t, dir), "sha256:"+sha(stream); got != want {
		t.Fatalf("ContentHash = %s, want %s", got, want)
	}
	empty := t.TempDir()
	if got, want := mustHash(t, empty), "sha256:"+sha("agentnode-content-v1\x00"); got != want {
		t.Fatalf("empty tree hash = %s, want %s", got, want)
	}
}

func TestContentHashRefuses(t *testing.T) {
	cases := map[string]struct {
		setup func(t *testing.T, dir string)
		want  string
	}{
		"fifo": {func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "p"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "named pipe"},
		"absolute symlink": {func(t *testing.T, dir string) {
			if err := os.Symlink("/etc", filepath.Join(dir, "l")); err != nil {
				t.Fatal(err)
			}
		}, "absolute"},
		"relative escape": {func(t *testing.T, dir string) {
			if err := os.Symlink("../outside", filepath.Join(dir, "l")); err != nil {
				t.Fatal(err)
			}
		}, "outside"},
		"escape through another symlink": {func(t *testing.T, dir string) {
			mustMkdir(t, filepath.Join(dir, "sub", "deep"))
			// x -> .. stays inside; x/../.. resolves to the parent of the tree.
			if err := os.Symlink("..", filepath.Join(dir, "sub", "deep", "x")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("x/../..", filepath.Join(dir, "sub", "deep", "l")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("../../../../etc", filepath.Join(dir, "sub", "deep", "m")); err != nil {
				t.Fatal(err)
			}
		}, "outside"},
		"dangling": {func(t *testing.T, dir string) {
			if err := os.Symlink("nothing", filepath.Join(dir, "l")); err != nil {
				t.Fatal(err)
			}
		}, "points to nothing"},
		"not a directory": {func(t *testing.T, dir string) {}, "not a directory"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c.setup(t, dir)
			if name == "not a directory" {
				dir = filepath.Join(dir, "f")
				mustWrite(t, dir, "", 0o644)
			}
			if _, err := ContentHash(dir); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ContentHash = %v, want an error containing %q", err, c.want)
			}
		})
	}
	// Symlinks that stay inside are fine, also through ".." and other links.
	dir := t.TempDir()
	mustMkdir(t, filepath.Join(dir, "sub", "deep"))
	mustWrite(t, filepath.Join(dir, "top"), "", 0o644)
	for link, target := range map[string]string{"sub/deep/up": "../../top", "sub/deep/dir": "..", "sub/deep/via": "dir/../top"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ContentHash(dir); err != nil {
		t.Fatalf("inside symlinks refused: %v", err)
	}
}
