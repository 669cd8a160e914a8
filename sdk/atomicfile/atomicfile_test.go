package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// leftovers fails if dir holds anything but want.
func leftovers(t *testing.T, dir string, want ...string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(des) != len(want) {
		var names []string
		for _, d := range des {
			names = append(names, d.Name())
		}
		t.Fatalf("%s holds %v, want %v", dir, names, want)
	}
}

func TestWriteFileReplacesWithExactMode(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	for _, c := range []struct {
		data string
		perm fs.FileMode
	}{{"one", 0o644}, {"two", 0o600}, {"three", 0o755}} {
		if err := WriteFile(p, []byte(c.data), c.perm); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		fi, _ := os.Stat(p)
		if err != nil || string(got) != c.data || fi.Mode().Perm() != c.perm {
			t.Fatalf("after writing %q %v: %q %v, %v", c.data, c.perm, got, fi.Mode(), err)
		}
	}
	leftovers(t, dir, "f")
}

// TestWriteFileDoesNotFollowSymlink: an attacker who can put a symlink at
// the target makes the writer replace the link, not write to its target.
func TestWriteFileDoesNotFollowSymlink(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("host file"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "f")
	if err := os.Symlink(victim, p); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "host file" {
		t.Fatalf("the symlink's target was written: %q", got)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("target is %v, %v; want a regular file", fi, err)
	}
}

func TestExclusiveNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteFile(p, []byte("first"), 0o600, Exclusive); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(p, []byte("second"), 0o600, Exclusive)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second exclusive write: %v, want fs.ErrExist", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "first" {
		t.Fatalf("exclusive write replaced the file: %q", got)
	}
	leftovers(t, dir, "f")
}

func TestFailedCommitLeavesTarget(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "d")
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Renaming a file over a non-empty directory fails.
	if err := WriteFile(p, []byte("new"), 0o600, NoSync); err == nil {
		t.Fatal("replaced a directory")
	}
	leftovers(t, dir, "d")
	f, err := New(filepath.Join(dir, "g"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Abort()
	if err := f.Commit(); err == nil {
		t.Fatal("Commit after Abort succeeded")
	}
	leftovers(t, dir, "d")
}

func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SyncDir(missing) = %v", err)
	}
}
