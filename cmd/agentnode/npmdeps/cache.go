package npmdeps

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The npm cache layout (cacache, as npm 7 and later write it): a tarball's
// bytes live under content-v2/ALGO/ at the hex digest of its integrity hash
// split 2/2/rest, and make-fetch-happen finds them through the index
// bucket of its request key under index-v5/, at the SHA-256 of the key
// split the same way.
const (
	cacacheDir = "_cacache"
	contentDir = "content-v2"
	indexDir   = "index-v5"
	keyPrefix  = "make-fetch-happen:request-cache:"
)

// segments splits a hex digest as cacache does: 2, 2, the rest.
func segments(h string) string {
	return filepath.Join(h[:2], h[2:4], h[4:])
}

// cacheRoot is the cacache directory of the npm cache dir: dir/_cacache,
// or dir itself when it is one (holds content-v2).
func cacheRoot(dir string) (string, error) {
	for _, d := range []string{filepath.Join(dir, cacacheDir), dir} {
		if fi, err := os.Stat(filepath.Join(d, contentDir)); err == nil && fi.IsDir() {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: %s is not an npm cache (no %s/%s or %s): give npm's cache directory (`npm config get cache`)",
		ErrLock, dir, cacacheDir, contentDir, contentDir)
}

// selectCache copies from the npm cache dir src into dst/_cacache what
// npm ci needs for lock, and nothing else: for every entry with a tarball
// of its own, its content (found by its integrity hash and checked against
// it while copied) and its index bucket (found by its resolved URL). The
// sandbox sees only those files, never the rest of the user's cache. A
// tarball missing from the cache, or whose bytes do not match the lock,
// refuses the install naming the package; more than maxBytes of tarballs
// too. Directories are 0755 and files 0644, readable by the sandbox user.
func selectCache(src, dst string, lock []byte, maxBytes int64) error {
	root, err := cacheRoot(src)
	if err != nil {
		return err
	}
	var doc lockDoc
	if err := json.Unmarshal(lock, &doc); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrLock, LockFile, err)
	}
	keys := make([]string, 0, len(doc.Packages))
	for k := range doc.Packages {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var total int64
	var missing []string
	for _, key := range keys {
		e := doc.Packages[key]
		if key == "" || e.Link || e.InBundle {
			continue
		}
		name := key[strings.LastIndex(key, ModulesDir+"/")+len(ModulesDir)+1:] + "@" + e.Version
		algo, digest, err := strongest(e.Integrity)
		if err != nil {
			return fmt.Errorf("%w: %s: %s: %w", ErrLock, LockFile, name, err)
		}
		rel := filepath.Join(contentDir, algo, segments(hex.EncodeToString(digest)))
		bucket := sha256.Sum256([]byte(keyPrefix + e.Resolved))
		idx := filepath.Join(indexDir, segments(hex.EncodeToString(bucket[:])))
		if !exists(filepath.Join(root, rel)) || !exists(filepath.Join(root, idx)) {
			missing = append(missing, name)
			continue
		}
		n, err := copyChecked(filepath.Join(root, rel), filepath.Join(dst, cacacheDir, rel), algo, digest, maxBytes-total)
		if err != nil {
			return fmt.Errorf("%w: %s in the npm cache: %w", ErrLock, name, err)
		}
		total += n
		if _, err := copyChecked(filepath.Join(root, idx), filepath.Join(dst, cacacheDir, idx), "", nil, MaxLockBytes); err != nil {
			return fmt.Errorf("%w: the npm cache's index for %s: %w", ErrLock, name, err)
		}
	}
	if len(missing) > 0 {
		more := ""
		if len(missing) > 5 {
			more = fmt.Sprintf(" and %d more", len(missing)-5)
			missing = missing[:5]
		}
		return fmt.Errorf("%w: not in the npm cache %s: %s%s (fill it where the registry is reachable, e.g. `npm ci --ignore-scripts --cache %s` in a copy of the package)",
			ErrLock, src, strings.Join(missing, ", "), more, src)
	}
	return nil
}

// strongest is the strongest hash of an SRI integrity string that npm
// accepts (sha512, else sha1), decoded.
func strongest(integrity string) (string, []byte, error) {
	var best string
	var digest []byte
	for _, f := range strings.Fields(integrity) {
		algo, b64, ok := strings.Cut(f, "-")
		if !ok || (algo != "sha512" && algo != "sha1") || (best == "sha512" && algo == "sha1") {
			continue
		}
		b64, _, _ = strings.Cut(b64, "?") // SRI options
		d, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return "", nil, fmt.Errorf("integrity %q: %w", integrity, err)
		}
		best, digest = algo, d
	}
	if best == "" {
		return "", nil, fmt.Errorf("integrity %q has no sha512 or sha1 hash", integrity)
	}
	return best, digest, nil
}

func exists(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular()
}

// errTooLarge is a cache file past its bound.
var errTooLarge = errors.New("larger than the bound for the tarballs of one install")

// copyChecked copies the regular file src to dst (its directories made
// 0755, the file 0644), at most max bytes, and when algo is set checks the
// bytes against digest.
func copyChecked(src, dst, algo string, digest []byte, max int64) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s is not a regular file", src)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return 0, nil // two entries sharing one tarball or bucket
	}
	if err != nil {
		return 0, err
	}
	var h hash.Hash
	w := io.Writer(out)
	switch algo {
	case "sha512":
		h = sha512.New()
	case "sha1":
		h = sha1.New()
	}
	if h != nil {
		w = io.MultiWriter(out, h)
	}
	n, err := io.Copy(w, io.LimitReader(in, max+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return n, err
	case n > max:
		return n, errTooLarge
	case h != nil && !bytes.Equal(h.Sum(nil), digest):
		return n, fmt.Errorf("its bytes do not match the lock's %s hash (a changed or corrupt cache)", algo)
	}
	return n, nil
}
