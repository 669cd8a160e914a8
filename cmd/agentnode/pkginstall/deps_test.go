package pkginstall

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
)

// fakeDeps is an InstallOptions.Deps that writes a small dependency tree,
// as pip --target would, and says what it installed.
func fakeDeps(t *testing.T) func(string, *manifest.Manifest) ([]string, error) {
	return func(content string, m *manifest.Manifest) ([]string, error) {
		if m == nil || m.PackageID == "" {
			t.Error("Deps got no manifest")
		}
		d := filepath.Join(content, store.DepsDir)
		mustMkdir(t, filepath.Join(d, "liba"))
		mustMkdir(t, filepath.Join(d, "liba-2.1.dist-info"))
		mustWrite(t, filepath.Join(d, "liba", "__init__.py"), "def quad(x):\n    return 4 * x\n", 0o644)
		mustWrite(t, filepath.Join(d, "liba-2.1.dist-info", "METADATA"), "Name: liba\nVersion: 2.1\n", 0o644)
		return []string{"liba==2.1"}, nil
	}
}

// TestInstallDeps: the dependencies are hashed apart, the artifact hash
// stays the source's, both are recorded and read back, and Verify passes.
func TestInstallDeps(t *testing.T) {
	s := newStore(t)
	src := makePkg(t, "deps-pack", "1.0.0")
	p, err := s.InstallFrom(src, InstallOptions{Deps: fakeDeps(t)})
	if err != nil {
		t.Fatal(err)
	}
	if want := mustHash(t, src); p.ArtifactHash != want {
		t.Fatalf("artifact hash %s, want the source's %s", p.ArtifactHash, want)
	}
	if want := mustHash(t, filepath.Join(p.Dir, store.DepsDir)); p.DepsHash != want || p.DepsHash == "" {
		t.Fatalf("deps hash %q, want %s", p.DepsHash, want)
	}
	if !slices.Equal(p.Dependencies, []string{"liba==2.1"}) {
		t.Fatalf("dependencies %q", p.Dependencies)
	}
	if fi, err := os.Stat(filepath.Join(p.Dir, store.DepsDir, "liba", "__init__.py")); err != nil || fi.Mode().Perm() != 0o444 {
		t.Fatalf("installed dependency file: %v %v (want read-only)", fi, err)
	}
	if err := s.Verify(p); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get("deps-pack")
	if err != nil {
		t.Fatal(err)
	}
	if got.DepsHash != p.DepsHash || !slices.Equal(got.Dependencies, p.Dependencies) {
		t.Fatalf("Get: %q %q, installed %q %q", got.DepsHash, got.Dependencies, p.DepsHash, p.Dependencies)
	}
	// Without dependencies nothing is recorded.
	q, err := s.InstallFrom(makePkg(t, "plain-pack", "1.0.0"), InstallOptions{
		Deps: func(string, *manifest.Manifest) ([]string, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if q.DepsHash != "" || q.Dependencies != nil {
		t.Fatalf("no dependencies, yet recorded %q %q", q.DepsHash, q.Dependencies)
	}
}

// TestVerifyDetectsDepsTampering: a dependency file changed, added or
// removed, the directory gone or replaced, and a dependencies directory
// that appears in a package installed without one, are artifact_mismatch.
func TestVerifyDetectsDepsTampering(t *testing.T) {
	cases := []struct {
		name   string
		deps   bool
		tamper func(t *testing.T, dir string)
	}{
		{"dependency file changed", true, func(t *testing.T, dir string) {
			f := filepath.Join(dir, store.DepsDir, "liba", "__init__.py")
			writable(t, f)
			mustWrite(t, f, "def quad(x):\n    return 5 * x\n", 0o444)
		}},
		{"dependency file added", true, func(t *testing.T, dir string) {
			writable(t, filepath.Join(dir, store.DepsDir))
			mustWrite(t, filepath.Join(dir, store.DepsDir, "evil.pth"), "import os\n", 0o444)
		}},
		{"dependency file removed", true, func(t *testing.T, dir string) {
			writable(t, filepath.Join(dir, store.DepsDir, "liba"))
			if err := os.Remove(filepath.Join(dir, store.DepsDir, "liba", "__init__.py")); err != nil {
				t.Fatal(err)
			}
		}},
		{"dependencies removed", true, func(t *testing.T, dir string) {
			writable(t, dir)
			if err := removeTree(filepath.Join(dir, store.DepsDir)); err != nil {
				t.Fatal(err)
			}
		}},
		{"dependencies replaced by a symlink", true, func(t *testing.T, dir string) {
			writable(t, dir)
			if err := os.Rename(filepath.Join(dir, store.DepsDir), filepath.Join(dir, "moved")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("moved", filepath.Join(dir, store.DepsDir)); err != nil {
				t.Fatal(err)
			}
		}},
		{"dependencies added to a package without", false, func(t *testing.T, dir string) {
			writable(t, dir)
			mustMkdir(t, filepath.Join(dir, store.DepsDir))
			mustWrite(t, filepath.Join(dir, store.DepsDir, "evil.pth"), "import os\n", 0o444)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			opts := InstallOptions{}
			if c.deps {
				opts.Deps = fakeDeps(t)
			}
			p, err := s.InstallFrom(makePkg(t, "deps-pack", "1.0.0"), opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Verify(p); err != nil {
				t.Fatalf("before tampering: %v", err)
			}
			c.tamper(t, p.Dir)
			err = s.Verify(p)
			if reason.CodeOf(err) != reason.ArtifactMismatch {
				t.Fatalf("Verify after %s: %v, want artifact_mismatch", c.name, err)
			}
		})
	}
}

// TestDepsFailureLeavesNothing: when Deps fails (after writing part of the
// dependencies) the install is undone: no package, no staging directory,
// and a previous install stays.
func TestDepsFailureLeavesNothing(t *testing.T) {
	s := newStore(t)
	old, err := s.Install(makePkg(t, "deps-pack", "1.0.0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("no wheel satisfies liba")
	_, err = s.InstallFrom(makePkg(t, "deps-pack", "2.0.0"), InstallOptions{
		Deps: func(content string, m *manifest.Manifest) ([]string, error) {
			mustMkdir(t, filepath.Join(content, store.DepsDir, "half"))
			return nil, boom
		}})
	if !errors.Is(err, boom) {
		t.Fatalf("install: %v, want the Deps error", err)
	}
	if names := rootNames(t, s); !slices.Equal(names, []string{"deps-pack"}) {
		t.Fatalf("store holds %q after the failed install", names)
	}
	p, err := s.Get("deps-pack")
	if err != nil || p.Version != "1.0.0" || p.ArtifactHash != old.ArtifactHash {
		t.Fatalf("previous install: %+v %v", p, err)
	}
	if _, err := os.Lstat(filepath.Join(p.Dir, store.DepsDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dependencies of the failed install are in the kept one: %v", err)
	}
}
