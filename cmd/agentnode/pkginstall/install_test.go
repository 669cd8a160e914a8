package pkginstall

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentnode/agentnode/cmd/agentnode/pkglist"
	"github.com/agentnode/agentnode/kernel/hashcache"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
)

func manifestYAML(id, version string) string {
	return fmt.Sprintf(`manifest_version: "0.2"
package_id: %s
package_type: toolpack
name: Test Pack
publisher: tester
version: %s
summary: A package for tests.
runtime: exec
capabilities:
  tools:
    - name: echo
      description: Echo.
      entrypoint: bin/echo
      input_schema: {type: object}
permissions:
  network: {level: none}
  filesystem: {level: none}
  code_execution: {level: none}
`, id, version)
}

// makePkg writes a package source directory and returns it.
func makePkg(t *testing.T, id, version string) string {
	t.Helper()
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, manifest.FileName), manifestYAML(id, version), 0o644)
	mustMkdir(t, filepath.Join(dir, "bin"))
	mustWrite(t, filepath.Join(dir, "bin", "echo"), "#!/bin/sh\ncat\n", 0o755)
	mustMkdir(t, filepath.Join(dir, "data", "empty"))
	mustWrite(t, filepath.Join(dir, "data", "words.txt"), "hello "+version+"\n", 0o640)
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

func newStore(t *testing.T) *Installer {
	t.Helper()
	s := Open(filepath.Join(t.TempDir(), "packages"))
	t.Cleanup(func() { _ = removeTree(s.Root()) })
	return s
}

// writable makes the directories above name writable, as a tamperer who is
// not root would.
func writable(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// rootNames lists the store root, without the lock file.
func rootNames(t *testing.T, s *Installer) []string {
	t.Helper()
	ents, err := os.ReadDir(s.Root())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e.Name() != lockFile {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestInstallGetVerify(t *testing.T) {
	s := newStore(t)
	s.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	src := makePkg(t, "echo-pack", "1.0.0")
	att := []byte(`{"package_id": "echo-pack", "trust_level": "verified"}`)
	p, err := s.Install(src, [][]byte{att})
	if err != nil {
		t.Fatal(err)
	}
	want, err := store.ContentHash(src)
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != "echo-pack" || p.Version != "1.0.0" || p.ArtifactHash != want || !strings.HasPrefix(want, "sha256:") {
		t.Fatalf("installed %+v, want hash %s", p, want)
	}
	if p.Dir != filepath.Join(s.Root(), "echo-pack", "content") {
		t.Fatalf("Dir = %s", p.Dir)
	}
	if !p.InstalledAt.Equal(s.now()) {
		t.Fatalf("InstalledAt = %v", p.InstalledAt)
	}
	if len(p.Attestations) != 1 || string(p.Attestations[0]) != `{"package_id":"echo-pack","trust_level":"verified"}` {
		t.Fatalf("attestations %q", p.Attestations)
	}
	if _, ok := p.Manifest.Tool("echo"); !ok {
		t.Fatal("manifest not loaded")
	}
	g, err := s.Get("echo-pack")
	if err != nil {
		t.Fatal(err)
	}
	if g.ArtifactHash != p.ArtifactHash || g.Version != "1.0.0" {
		t.Fatalf("Get = %+v", g)
	}
	if err := s.Verify(g); err != nil {
		t.Fatalf("Verify of an untouched install: %v", err)
	}
	if names := rootNames(t, s); len(names) != 1 || names[0] != "echo-pack" {
		t.Fatalf("store root holds %v", names)
	}
	// Read-only tree.
	modes := map[string]fs.FileMode{
		".":               0o555,
		"bin":             0o555,
		"bin/echo":        0o555,
		"data/words.txt":  0o444,
		"data/empty":      0o555,
		"agentnode.yaml":  0o444,
		"../meta.json":    0o444,
		"../../echo-pack": 0o555,
	}
	for name, want := range modes {
		fi, err := os.Lstat(filepath.Join(p.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", name, fi.Mode().Perm(), want)
		}
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, dir string)
	}{
		{"one byte changed", func(t *testing.T, dir string) {
			f := filepath.Join(dir, "data", "words.txt")
			writable(t, f)
			b, _ := os.ReadFile(f)
			b[0] ^= 1
			mustWrite(t, f, string(b), 0o444)
		}},
		{"file added", func(t *testing.T, dir string) {
			writable(t, filepath.Join(dir, "data"))
			mustWrite(t, filepath.Join(dir, "data", "extra"), "", 0o444)
		}},
		{"empty directory added", func(t *testing.T, dir string) {
			writable(t, dir)
			mustMkdir(t, filepath.Join(dir, "more"))
		}},
		{"file removed", func(t *testing.T, dir string) {
			writable(t, filepath.Join(dir, "data"))
			if err := os.Remove(filepath.Join(dir, "data", "words.txt")); err != nil {
				t.Fatal(err)
			}
		}},
		{"file renamed", func(t *testing.T, dir string) {
			writable(t, filepath.Join(dir, "data"))
			if err := os.Rename(filepath.Join(dir, "data", "words.txt"), filepath.Join(dir, "data", "word.txt")); err != nil {
				t.Fatal(err)
			}
		}},
		{"chmod +x", func(t *testing.T, dir string) {
			if err := os.Chmod(filepath.Join(dir, "data", "words.txt"), 0o555); err != nil {
				t.Fatal(err)
			}
		}},
		{"chmod -x", func(t *testing.T, dir string) {
			if err := os.Chmod(filepath.Join(dir, "bin", "echo"), 0o444); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink retargeted", func(t *testing.T, dir string) {
			writable(t, filepath.Join(dir, "data"))
			l := filepath.Join(dir, "data", "echo-link")
			if err := os.Remove(l); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("words.txt", l); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink out of the tree", func(t *testing.T, dir string) {
			writable(t, filepath.Join(dir, "data"))
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, "data", "passwd")); err != nil {
				t.Fatal(err)
			}
		}},
		{"fifo added", func(t *testing.T, dir string) {
			writable(t, dir)
			if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	cases = append(cases, struct {
		name   string
		tamper func(t *testing.T, dir string)
	}{"same-size rewrite, mtime put back", func(t *testing.T, dir string) {
		f := filepath.Join(dir, "data", "words.txt")
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		writable(t, f)
		b, _ := os.ReadFile(f)
		b[0] ^= 1
		time.Sleep(10 * time.Millisecond) // a tick of the coarse file clock
		mustWrite(t, f, string(b), fi.Mode().Perm())
		if err := os.Chtimes(f, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
	}})
	// Each case also with the digest cache (kernel/hashcache) warm: every
	// file hashed and vouched for before the tampering.
	for _, cached := range []bool{false, true} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/cached=%v", c.name, cached), func(t *testing.T) {
				s := newStore(t)
				p, err := s.Install(makePkg(t, "echo-pack", "1.0.0"), nil)
				if err != nil {
					t.Fatal(err)
				}
				if cached {
					old := hashcache.Settle
					hashcache.Settle = 0
					t.Cleanup(func() { hashcache.Settle = old })
					cache := hashcache.Open(filepath.Join(t.TempDir(), store.HashCacheFile))
					s.WithHashes(cache)
					if err := s.Verify(p); err != nil {
						t.Fatal(err)
					}
					if n := len(hashcache.Read(cache.Path())); n != 3 {
						t.Fatalf("%d files in the digest cache, want 3", n)
					}
				}
				c.tamper(t, p.Dir)
				err = s.Verify(p)
				if !errors.Is(err, reason.ErrArtifactMismatch) || reason.CodeOf(err) != reason.ArtifactMismatch {
					t.Fatalf("Verify after tampering = %v, want artifact_mismatch", err)
				}
			})
		}
	}
}

// With a warm digest cache Verify takes unchanged files' digests from the
// cache instead of reading them: an entry whose stamps match is believed
// (the cache is as trusted as the store's own metadata), which this test
// shows by planting a wrong digest under the right stamps.
func TestVerifyUsesTheDigestCache(t *testing.T) {
	old := hashcache.Settle
	hashcache.Settle = 0
	t.Cleanup(func() { hashcache.Settle = old })
	s := newStore(t)
	p, err := s.Install(makePkg(t, "echo-pack", "1.0.0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), store.HashCacheFile)
	s.WithHashes(hashcache.Open(path))
	if err := s.Verify(p); err != nil {
		t.Fatal(err)
	}
	m := hashcache.Read(path)
	name := filepath.Join(p.Dir, "data", "words.txt")
	e, ok := m[name]
	if !ok {
		t.Fatalf("%s not in the cache: %v", name, m)
	}
	e.SHA256 = strings.Repeat("0", 64)
	m[name] = e
	if err := hashcache.Write(path, m); err != nil {
		t.Fatal(err)
	}
	s.WithHashes(hashcache.Open(path))
	if err := s.Verify(p); !errors.Is(err, reason.ErrArtifactMismatch) {
		t.Fatalf("Verify with a planted digest = %v: the cache was not consulted", err)
	}
	s.WithHashes(nil)
	if err := s.Verify(p); err != nil {
		t.Fatalf("Verify without the cache: %v", err)
	}
}

func TestFailedInstallLeavesNothing(t *testing.T) {
	cases := []struct {
		name  string
		src   func(t *testing.T) string
		atts  [][]byte
		wantE string
	}{
		{"bad manifest", func(t *testing.T) string {
			dir := makePkg(t, "echo-pack", "1.0.0")
			mustWrite(t, filepath.Join(dir, manifest.FileName), manifestYAML("echo-pack", "1.0"), 0o644)
			return dir
		}, nil, "version"},
		{"no manifest", func(t *testing.T) string { return t.TempDir() }, nil, "agentnode.yaml: not found"},
		{"bad attestation", func(t *testing.T) string { return makePkg(t, "echo-pack", "1.0.0") },
			[][]byte{[]byte(`{"a":`)}, "attestation 1 is not valid JSON"},
		{"fifo in the tree", func(t *testing.T) string {
			dir := makePkg(t, "echo-pack", "1.0.0")
			if err := syscall.Mkfifo(filepath.Join(dir, "data", "fifo"), 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		}, nil, "data/fifo: a named pipe (FIFO) is not allowed"},
		{"symlink outside", func(t *testing.T) string {
			dir := makePkg(t, "echo-pack", "1.0.0")
			if err := os.Symlink("../../../etc/passwd", filepath.Join(dir, "data", "passwd")); err != nil {
				t.Fatal(err)
			}
			return dir
		}, nil, "points outside the package"},
		{"absolute symlink", func(t *testing.T) string {
			dir := makePkg(t, "echo-pack", "1.0.0")
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")); err != nil {
				t.Fatal(err)
			}
			return dir
		}, nil, "absolute symlinks are not allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			_, err := s.Install(c.src(t), c.atts)
			if err == nil || !strings.Contains(err.Error(), c.wantE) {
				t.Fatalf("Install error = %v, want one containing %q", err, c.wantE)
			}
			if names := rootNames(t, s); len(names) != 0 {
				t.Fatalf("failed install left %v", names)
			}
			if _, err := s.Get("echo-pack"); !errors.Is(err, store.ErrNotInstalled) {
				t.Fatalf("Get after failed install = %v", err)
			}
		})
	}
}

func TestReinstallReplaces(t *testing.T) {
	s := newStore(t)
	if _, err := s.Install(makePkg(t, "echo-pack", "1.0.0"), [][]byte{[]byte(`{"v":1}`)}); err != nil {
		t.Fatal(err)
	}
	src2 := makePkg(t, "echo-pack", "2.0.0")
	p2, err := s.Install(src2, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Get("echo-pack")
	if err != nil {
		t.Fatal(err)
	}
	if g.Version != "2.0.0" || g.ArtifactHash != p2.ArtifactHash || len(g.Attestations) != 0 {
		t.Fatalf("after reinstall: %+v", g)
	}
	b, err := os.ReadFile(filepath.Join(g.Dir, "data", "words.txt"))
	if err != nil || string(b) != "hello 2.0.0\n" {
		t.Fatalf("content not replaced: %q %v", b, err)
	}
	if err := s.Verify(g); err != nil {
		t.Fatal(err)
	}
	if names := rootNames(t, s); len(names) != 1 {
		t.Fatalf("store root holds %v", names)
	}

	// A failed reinstall keeps the previous install.
	bad := makePkg(t, "echo-pack", "3.0.0")
	if err := syscall.Mkfifo(filepath.Join(bad, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Install(bad, nil); err == nil {
		t.Fatal("install with a fifo succeeded")
	}
	g, err = s.Get("echo-pack")
	if err != nil || g.Version != "2.0.0" || s.Verify(g) != nil {
		t.Fatalf("previous install damaged: %+v %v", g, err)
	}
	if names := rootNames(t, s); len(names) != 1 {
		t.Fatalf("store root holds %v", names)
	}
}

func TestRemove(t *testing.T) {
	s := newStore(t)
	if err := s.Remove("echo-pack"); !errors.Is(err, store.ErrNotInstalled) {
		t.Fatalf("Remove from an empty store = %v", err)
	}
	if _, err := s.Install(makePkg(t, "echo-pack", "1.0.0"), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("echo-pack"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get("echo-pack")
	if !errors.Is(err, store.ErrNotInstalled) || err.Error() != `package "echo-pack" is not installed` {
		t.Fatalf("Get after Remove = %v", err)
	}
	if err := s.Remove("echo-pack"); !errors.Is(err, store.ErrNotInstalled) {
		t.Fatalf("second Remove = %v", err)
	}
	if names := rootNames(t, s); len(names) != 0 {
		t.Fatalf("Remove left %v", names)
	}
}

func TestInvalidIDs(t *testing.T) {
	s := newStore(t)
	for _, id := range []string{"", "..", "../x", "a/b", "AB", ".lock", ".staging-x"} {
		if _, err := s.Get(id); err == nil || errors.Is(err, store.ErrNotInstalled) || !strings.Contains(err.Error(), "invalid package id") {
			t.Errorf("Get(%q) = %v", id, err)
		}
		if err := s.Remove(id); err == nil || !strings.Contains(err.Error(), "invalid package id") {
			t.Errorf("Remove(%q) = %v", id, err)
		}
	}
}

func TestList(t *testing.T) {
	s := newStore(t)
	if ps, err := pkglist.List(s.Store); err != nil || len(ps) != 0 {
		t.Fatalf("List of a missing store = %v, %v", ps, err)
	}
	for _, id := range []string{"zeta-pack", "alpha-pack", "mid-pack"} {
		if _, err := s.Install(makePkg(t, id, "1.0.0"), nil); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := pkglist.List(s.Store)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	if strings.Join(ids, ",") != "alpha-pack,mid-pack,zeta-pack" {
		t.Fatalf("List = %v", ids)
	}
	// A corrupt package is reported, the others still listed.
	meta := filepath.Join(s.Root(), "mid-pack", store.MetaFile)
	writable(t, filepath.Join(s.Root(), "mid-pack"), meta)
	mustWrite(t, meta, "{", 0o444)
	ps, err = pkglist.List(s.Store)
	if len(ps) != 2 || err == nil || !strings.Contains(err.Error(), "mid-pack") || !errors.Is(err, reason.ErrArtifactMismatch) {
		t.Fatalf("List with a corrupt package = %d packages, %v", len(ps), err)
	}
}

func TestRecoverInterrupted(t *testing.T) {
	s := newStore(t)
	if _, err := s.Install(makePkg(t, "echo-pack", "1.0.0"), nil); err != nil {
		t.Fatal(err)
	}
	// Crash between "rename old aside" and "rename new in", with a staging
	// directory left behind.
	if err := os.Rename(filepath.Join(s.Root(), "echo-pack"), filepath.Join(s.Root(), oldPrefix+"echo-pack.1234")); err != nil {
		t.Fatal(err)
	}
	mustMkdir(t, filepath.Join(s.Root(), stagingPrefix+"999", "content"))
	if _, err := s.Install(makePkg(t, "other-pack", "1.0.0"), nil); err != nil {
		t.Fatal(err)
	}
	p, err := s.Get("echo-pack")
	if err != nil || s.Verify(p) != nil {
		t.Fatalf("interrupted install not restored: %v", err)
	}
	if names := rootNames(t, s); strings.Join(names, ",") != "echo-pack,other-pack" {
		t.Fatalf("store root holds %v", names)
	}
}

func TestInstallRefusesOverlap(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "pkg")
	if err := os.CopyFS(src, os.DirFS(makePkg(t, "echo-pack", "1.0.0"))); err != nil {
		t.Fatal(err)
	}
	s := Open(filepath.Join(src, "home", "packages"))
	if _, err := s.Install(src, nil); err == nil || !strings.Contains(err.Error(), "overlaps the package store") {
		t.Fatalf("install of a tree containing the store = %v", err)
	}
}

func mustHash(t *testing.T, dir string) string {
	t.Helper()
	h, err := store.ContentHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
