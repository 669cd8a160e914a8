package treewatch_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/sdk/treewatch"
)

// digest is a stand-in for the store's content hash: every entry's path,
// type, mode and content (or link target).
func digest(root string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(h, "%s\x00%v\x00", rel, info.Mode())
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		case info.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			h.Write([]byte(t))
		}
		h.Write([]byte{0})
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

var errMismatch = errors.New("artifact_mismatch")

// tree makes an installed-looking tree under a private dir: nested
// directories, read-only files, a symlink, and a hard link to one file
// made beforehand outside the tree (the attacker's). It returns the tree,
// the outside link and the tree's digest.
func tree(t *testing.T) (root, outside, sum string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "pkg", "content")
	for _, d := range []string{"node_modules/a/dist", "node_modules/b", "bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i, f := range []string{"agentnode.yaml", "node_modules/a/dist/index.js", "node_modules/a/package.json", "node_modules/b/index.js", "bin/run"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte(fmt.Sprintf("file %d\n", i)), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../a/dist/index.js", filepath.Join(root, "node_modules/b/link.js")); err != nil {
		t.Fatal(err)
	}
	outside = filepath.Join(base, "kept-link")
	if err := os.Link(filepath.Join(root, "node_modules/a/dist/index.js"), outside); err != nil {
		t.Fatal(err)
	}
	sum, err := digest(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, outside, sum
}

// verifier counts full verifications of root against want.
func verifier(root, want string, n *int) func() error {
	return func() error {
		*n++
		got, err := digest(root)
		if err != nil {
			return fmt.Errorf("%w: %w", errMismatch, err)
		}
		if got != want {
			return fmt.Errorf("%w: digest %s, sealed %s", errMismatch, got, want)
		}
		return nil
	}
}

// TestSealsRefuseChanges: after a tree was verified and sealed, each
// change an attacker can make between two calls is refused at the next
// Verify, naming what changed; reading the tree changes nothing, and an
// untouched tree is not verified again.
func TestSealsRefuseChanges(t *testing.T) {
	attacks := []struct {
		name, path string
		do         func(t *testing.T, root, outside string)
	}{
		{"write a file", "node_modules/a/package.json", func(t *testing.T, root, _ string) {
			p := filepath.Join(root, "node_modules/a/package.json")
			must(t, os.Chmod(p, 0o644))
			must(t, os.WriteFile(p, []byte("evil\n"), 0o644))
		}},
		{"add a file", "node_modules/b/evil.js", func(t *testing.T, root, _ string) {
			must(t, os.WriteFile(filepath.Join(root, "node_modules/b/evil.js"), []byte("evil"), 0o444))
		}},
		{"rename a file", "node_modules/b/index.js", func(t *testing.T, root, _ string) {
			must(t, os.Rename(filepath.Join(root, "node_modules/b/index.js"), filepath.Join(root, "node_modules/b/main.js")))
		}},
		{"chmod a file", "bin/run", func(t *testing.T, root, _ string) {
			must(t, os.Chmod(filepath.Join(root, "bin/run"), 0o555))
		}},
		{"replace a directory", "node_modules/a", func(t *testing.T, root, _ string) {
			a := filepath.Join(root, "node_modules/a")
			must(t, os.Rename(a, a+".old"))
			must(t, os.MkdirAll(filepath.Join(a, "dist"), 0o755))
			must(t, os.WriteFile(filepath.Join(a, "dist/index.js"), []byte("evil"), 0o444))
			must(t, os.WriteFile(filepath.Join(a, "package.json"), []byte("file 2\n"), 0o444))
			must(t, os.RemoveAll(a+".old"))
		}},
		{"write through a hard link made beforehand", "node_modules/a/dist/index.js", func(t *testing.T, _, outside string) {
			must(t, os.Chmod(outside, 0o644))
			must(t, os.WriteFile(outside, []byte("evil\n"), 0o644))
		}},
		{"replace a symlink", "node_modules/b/link.js", func(t *testing.T, root, _ string) {
			l := filepath.Join(root, "node_modules/b/link.js")
			must(t, os.Remove(l))
			must(t, os.Symlink("../../bin/run", l))
		}},
		{"replace the tree's parent", ".", func(t *testing.T, root, _ string) {
			pkg := filepath.Dir(root)
			must(t, os.Rename(pkg, pkg+".old"))
			must(t, os.MkdirAll(root, 0o755))
			must(t, os.WriteFile(filepath.Join(root, "agentnode.yaml"), []byte("evil"), 0o444))
		}},
	}
	for _, a := range attacks {
		t.Run(strings.ReplaceAll(a.name, " ", "_"), func(t *testing.T) {
			root, outside, sum := tree(t)
			s := treewatch.NewSeals()
			defer s.Close()
			n := 0
			verify := verifier(root, sum, &n)
			for range 3 {
				must(t, s.Verify(root, sum, verify))
				if _, err := digest(root); err != nil { // reading it is no change
					t.Fatal(err)
				}
			}
			if n != 1 || !s.Watched(root, sum) {
				t.Fatalf("an untouched tree verified %d times in 3 calls (watched: %v)", n, s.Watched(root, sum))
			}
			a.do(t, root, outside)
			err := s.Verify(root, sum, verify)
			if !errors.Is(err, errMismatch) || !strings.Contains(err.Error(), "changed since it was verified: "+a.path) {
				t.Fatalf("after %s: %v", a.name, err)
			}
			if n != 2 || s.Watched(root, sum) {
				t.Fatalf("after %s: %d verifications, watched %v", a.name, n, s.Watched(root, sum))
			}
			// Still refused at the call after (never sealed again as is).
			if err := s.Verify(root, sum, verify); !errors.Is(err, errMismatch) {
				t.Fatalf("the second call after %s: %v", a.name, err)
			}
			t.Logf("%s: %v", a.name, err)
		})
	}
}

// TestSealsRestoredAndKey: a change that leaves the content as sealed
// (a file touched) is verified again and sealed again; a tree sealed for
// one key is verified again for another; a write through a descriptor
// opened before the seal taints it.
func TestSealsRestoredAndKey(t *testing.T) {
	root, _, sum := tree(t)
	s := treewatch.NewSeals()
	defer s.Close()
	n := 0
	verify := verifier(root, sum, &n)
	p := filepath.Join(root, "agentnode.yaml")
	must(t, os.Chmod(p, 0o644))
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	must(t, err)
	defer f.Close()
	must(t, os.Chmod(p, 0o444))
	must(t, s.Verify(root, sum, verify))
	must(t, os.Chtimes(p, fsTime(), fsTime()))
	must(t, s.Verify(root, sum, verify))
	if n != 2 || !s.Watched(root, sum) {
		t.Fatalf("a touched but unchanged tree: %d verifications, watched %v", n, s.Watched(root, sum))
	}
	must(t, s.Verify(root, "other", func() error { n++; return nil }))
	if n != 3 {
		t.Fatalf("another key did not verify: %d", n)
	}
	if _, err := f.WriteAt([]byte("evil"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(root, sum, verify); !errors.Is(err, errMismatch) || !strings.Contains(err.Error(), "agentnode.yaml") {
		t.Fatalf("a write through a descriptor opened before: %v", err)
	}
}

// TestSealsFallBack: a tree that cannot be watched (more entries than
// MaxEntries) is verified in full on every call, never skipped.
func TestSealsFallBack(t *testing.T) {
	root, _, sum := tree(t)
	if _, err := treewatch.Arm(root); err != nil {
		t.Fatalf("arm: %v", err)
	}
	old := treewatch.MaxEntries
	treewatch.MaxEntries = 3
	defer func() { treewatch.MaxEntries = old }()
	if _, err := treewatch.Arm(root); !errors.Is(err, treewatch.ErrTooLarge) {
		t.Fatalf("arm over the bound: %v", err)
	}
	s := treewatch.NewSeals()
	defer s.Close()
	n := 0
	for range 3 {
		must(t, s.Verify(root, sum, verifier(root, sum, &n)))
	}
	if n != 3 || s.Watched(root, sum) {
		t.Fatalf("an unwatchable tree: %d verifications in 3 calls, watched %v", n, s.Watched(root, sum))
	}
	var nilSeals *treewatch.Seals
	must(t, nilSeals.Verify(root, sum, verifier(root, sum, &n)))
	if n != 4 {
		t.Fatal("nil Seals did not verify")
	}
}

func fsTime() time.Time { return time.Now().Add(time.Hour) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSealsMaxAge: a write through a shared writable mapping made before
// the seal is what inotify does not report; it is found by the full
// verification at the first call after MaxAge.
func TestSealsMaxAge(t *testing.T) {
	root, _, sum := tree(t)
	p := filepath.Join(root, "node_modules/b/index.js")
	must(t, os.Chmod(p, 0o644))
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, 8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	must(t, err)
	defer unix.Munmap(mem)
	must(t, os.Chmod(p, 0o444))
	sum, err = digest(root)
	must(t, err)
	s := treewatch.NewSeals()
	defer s.Close()
	n := 0
	verify := verifier(root, sum, &n)
	must(t, s.Verify(root, sum, verify))
	copy(mem, "tampered")
	if err := s.Verify(root, sum, verify); err != nil || n != 1 {
		t.Fatalf("inotify reported a write through a mapping (%v, %d verifications): the documented gap is gone, update the docs", err, n)
	}
	old := treewatch.MaxAge
	treewatch.MaxAge = 0
	defer func() { treewatch.MaxAge = old }()
	if err := s.Verify(root, sum, verify); !errors.Is(err, errMismatch) || n != 2 {
		t.Fatalf("after MaxAge: %v (%d verifications)", err, n)
	}
}
