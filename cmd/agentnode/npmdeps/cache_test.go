package npmdeps

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTarball is the bytes standing in for one package's tarball.
func fakeTarball(name string) []byte { return []byte("tarball of " + name) }

// cacheWith writes an npm cache (dir/_cacache, cacache's layout) holding
// the content and an index bucket for each name's tarball, and returns
// the lock entries for them.
func cacheWith(t *testing.T, dir string, names ...string) map[string]string {
	t.Helper()
	entries := map[string]string{}
	for _, n := range names {
		sum := sha512.Sum512(fakeTarball(n))
		integrity := "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
		url := Registry + n + "/-/" + n + "-1.0.0.tgz"
		content := filepath.Join(dir, cacacheDir, contentDir, "sha512", segments(hex.EncodeToString(sum[:])))
		key := sha256.Sum256([]byte(keyPrefix + url))
		index := filepath.Join(dir, cacacheDir, indexDir, segments(hex.EncodeToString(key[:])))
		for p, data := range map[string][]byte{
			content: fakeTarball(n),
			index:   []byte(fmt.Sprintf("\n0000\t{\"key\":%q,\"integrity\":%q}", keyPrefix+url, integrity)),
		} {
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		entries["node_modules/"+n] = fmt.Sprintf(`{"version": "1.0.0", "resolved": %q, "integrity": %q}`, url, integrity)
	}
	return entries
}

func lockOf(entries map[string]string) []byte {
	var parts []string
	for k, v := range entries {
		parts = append(parts, fmt.Sprintf("%q: %s", k, v))
	}
	return []byte(`{"lockfileVersion": 3, "packages": {"": {}, ` + strings.Join(parts, ", ") + `}}`)
}

// files lists the regular files under dir, relative.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// TestSelectCache: only the lock's tarballs and their index buckets reach
// the copy, checked against the lock and readable by anyone; a missing,
// changed or oversized tarball refuses the install naming the package.
func TestSelectCache(t *testing.T) {
	src := t.TempDir()
	all := cacheWith(t, src, "left-pad", "is-odd", "unrelated-secret")
	lock := map[string]string{"node_modules/left-pad": all["node_modules/left-pad"], "node_modules/is-odd": all["node_modules/is-odd"]}

	dst := t.TempDir()
	if err := selectCache(src, dst, lockOf(lock), 1<<20); err != nil {
		t.Fatal(err)
	}
	got := files(t, dst)
	if len(got) != 4 {
		t.Fatalf("copied %q, want the 2 tarballs and their 2 index buckets", got)
	}
	for _, f := range got {
		fi, _ := os.Stat(filepath.Join(dst, f))
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v", f, fi.Mode())
		}
		if data, _ := os.ReadFile(filepath.Join(dst, f)); strings.Contains(string(data), "unrelated-secret") {
			t.Errorf("%s: a tarball the lock does not name was copied", f)
		}
	}
	// The cache's _cacache directory itself may be named.
	if err := selectCache(filepath.Join(src, cacacheDir), t.TempDir(), lockOf(lock), 1<<20); err != nil {
		t.Fatalf("naming _cacache: %v", err)
	}

	refused := func(name string, lock map[string]string, max int64, want string) {
		t.Helper()
		err := selectCache(src, t.TempDir(), lockOf(lock), max)
		if !errors.Is(err, ErrLock) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrLock with %q", name, err, want)
		}
	}
	missing := map[string]string{"node_modules/absent": strings.ReplaceAll(all["node_modules/left-pad"], "left-pad", "absent")}
	refused("not cached", missing, 1<<20, "not in the npm cache")
	refused("not cached", missing, 1<<20, "absent@1.0.0")
	refused("too large", lock, 10, "larger than the bound")
	if err := selectCache(t.TempDir(), t.TempDir(), lockOf(lock), 1<<20); err == nil || !strings.Contains(err.Error(), "is not an npm cache") {
		t.Errorf("an empty directory: %v", err)
	}

	// An attacker (or a broken disk) changed a cached tarball.
	sum := sha512.Sum512(fakeTarball("is-odd"))
	p := filepath.Join(src, cacacheDir, contentDir, "sha512", segments(hex.EncodeToString(sum[:])))
	if err := os.WriteFile(p, []byte("tarball of is-odd, with a payload"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused("changed", lock, 1<<20, "do not match the lock's sha512 hash")
}

func TestStrongest(t *testing.T) {
	sum := sha512.Sum512([]byte("x"))
	s512 := "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
	for _, in := range []string{s512, "sha1-AAAAAAAAAAAAAAAAAAAAAAAAAAA= " + s512, s512 + " sha1-AAAAAAAAAAAAAAAAAAAAAAAAAAA="} {
		algo, d, err := strongest(in)
		if err != nil || algo != "sha512" || string(d) != string(sum[:]) {
			t.Errorf("strongest(%q) = %s %x %v", in, algo, d, err)
		}
	}
	if _, _, err := strongest("md5-AAAA"); err == nil {
		t.Error("md5 accepted")
	}
}
