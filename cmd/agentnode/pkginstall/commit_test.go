package pkginstall

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentnode/agentnode/kernel/store"
)

// TestCommitFailureUndoesTheInstall: when Commit (the CLI's lockfile
// update) fails, the install is undone — a fresh install leaves nothing, a
// reinstall leaves the previous install — and the error is Commit's. For a
// directory and for an archive alike.
func TestCommitFailureUndoesTheInstall(t *testing.T) {
	errLock := errors.New("lockfile not writable")
	failing := func(p *store.Package) error {
		if _, err := os.Stat(filepath.Join(p.Dir, "agentnode.yaml")); err != nil {
			t.Errorf("Commit called before the package is in place: %v", err)
		}
		return errLock
	}
	for _, kind := range []string{store.SourceDirectory, store.SourceArchive} {
		t.Run(kind, func(t *testing.T) {
			s := newStore(t)
			src := func(version string) string {
				if kind == store.SourceDirectory {
					return makePkg(t, "echo-pack", version)
				}
				return writeFile(t, "pkg-"+version+".tgz", tgz(t, goodEntries("echo-pack", version)))
			}
			_, err := s.InstallFrom(src("1.0.0"), InstallOptions{Commit: failing})
			if !errors.Is(err, errLock) {
				t.Fatalf("install = %v, want the commit's error", err)
			}
			if _, err := s.Get("echo-pack"); !errors.Is(err, store.ErrNotInstalled) {
				t.Fatalf("after a failed commit: Get = %v, want not installed", err)
			}
			if names := rootNames(t, s); len(names) != 0 {
				t.Fatalf("store root holds %v", names)
			}

			var committed *store.Package
			p1, err := s.InstallFrom(src("1.0.0"), InstallOptions{Commit: func(p *store.Package) error { committed = p; return nil }})
			if err != nil {
				t.Fatal(err)
			}
			if committed == nil || committed.ArtifactHash != p1.ArtifactHash {
				t.Fatalf("Commit saw %+v, install returned %+v", committed, p1)
			}
			if _, err := s.InstallFrom(src("2.0.0"), InstallOptions{Commit: failing}); !errors.Is(err, errLock) {
				t.Fatalf("reinstall = %v, want the commit's error", err)
			}
			g, err := s.Get("echo-pack")
			if err != nil || g.Version != "1.0.0" || g.ArtifactHash != p1.ArtifactHash || s.Verify(g) != nil {
				t.Fatalf("previous install not restored: %+v %v", g, err)
			}
			if names := rootNames(t, s); len(names) != 1 {
				t.Fatalf("store root holds %v", names)
			}
		})
	}
}

// TestDirectoryContentRefusedLikeArchive: a symlink out of the package and
// a special file are refused with the archive's errors (ErrLinkEscape,
// ErrSpecialFile) from a directory too, so callers tell them from machine
// failures the same way.
func TestDirectoryContentRefusedLikeArchive(t *testing.T) {
	cases := map[string]struct {
		setup func(t *testing.T, dir string)
		kind  error
	}{
		"absolute symlink": {func(t *testing.T, dir string) {
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, "leak")); err != nil {
				t.Fatal(err)
			}
		}, ErrLinkEscape},
		"relative escape": {func(t *testing.T, dir string) {
			if err := os.Symlink("../../outside", filepath.Join(dir, "leak")); err != nil {
				t.Fatal(err)
			}
		}, ErrLinkEscape},
		"fifo": {func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, ErrSpecialFile},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			src := makePkg(t, "echo-pack", "1.0.0")
			c.setup(t, src)
			_, err := s.InstallFrom(src, InstallOptions{})
			if !errors.Is(err, c.kind) {
				t.Fatalf("install = %v, want %v", err, c.kind)
			}
			if names := rootNames(t, s); len(names) != 0 {
				t.Fatalf("store root holds %v", names)
			}
		})
	}
}
