package pluginhost

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentnode/agentnode/kernel/hashcache"
	"github.com/agentnode/agentnode/kernel/reason"
)

// countHashes counts the binaries actually hashed while the test runs, and
// lets every file count as settled.
func countHashes(t *testing.T) *atomic.Int32 {
	t.Helper()
	var n atomic.Int32
	onHash = func(string) { n.Add(1) }
	old := hashcache.Settle
	hashcache.Settle = 0
	t.Cleanup(func() { onHash, hashcache.Settle = nil, old })
	return &n
}

// startTrust starts the faulty trust plugin in a fresh host and stops it.
func startTrust(t *testing.T, e *env) error {
	t.Helper()
	h := e.host(t, Options{})
	defer h.Close()
	c, err := h.Trust(context.Background(), "faulty")
	if err != nil {
		return err
	}
	_, err = evaluate(context.Background(), c)
	return err
}

func TestHashCacheSparesRehash(t *testing.T) {
	n := countHashes(t)
	e := newEnv(t, "ok", true)
	for i := 0; i < 3; i++ {
		if err := startTrust(t, e); err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
	}
	if got := n.Load(); got != 1 {
		t.Fatalf("hashed %d times in 3 starts, want 1 (then the cache vouches)", got)
	}
	fi, err := os.Stat(hashCachePath(e.home))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file mode %v, %v", fi.Mode().Perm(), err)
	}
	if m := hashcache.Read(hashCachePath(e.home)); m[e.path].SHA256 == "" {
		t.Fatalf("cache has no entry for %s: %v", e.path, m)
	}
}

// A binary replaced after it was cached (new inode) or changed in place
// (same inode, new ctime) is hashed again and refused.
func TestHashCacheNeverVouchesForAChangedFile(t *testing.T) {
	for _, how := range []string{"replaced", "in place"} {
		t.Run(how, func(t *testing.T) {
			n := countHashes(t)
			e := newEnv(t, "ok", false)
			// A private copy, so writing in place does not touch the
			// shared test binary behind the hard link.
			b, err := os.ReadFile(e.path)
			if err != nil {
				t.Fatal(err)
			}
			replace(t, e.path, b)
			testPin(t, e.home, e.path)
			if err := startTrust(t, e); err != nil {
				t.Fatal(err)
			}
			before := n.Load()
			switch how {
			case "replaced":
				replace(t, e.path, append(b, "evil"...))
			case "in place":
				f, err := os.OpenFile(e.path, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				// Same size, same inode: only ctime/mtime tell.
				if _, err := f.WriteAt([]byte{b[len(b)-1] ^ 0xff}, int64(len(b)-1)); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			err = startTrust(t, e)
			if !errors.Is(err, reason.ErrPluginUnpinned) {
				t.Fatalf("start after the binary changed %s = %v, want plugin_unpinned", how, err)
			}
			if n.Load() == before {
				t.Fatal("the changed binary was not hashed again")
			}
		})
	}
}

// A forged or foreign cache entry (right digest, other stamps) does not
// spare the hash; a corrupt cache is ignored.
func TestHashCacheEntriesMustMatchTheFile(t *testing.T) {
	n := countHashes(t)
	e := newEnv(t, "ok", true)
	if err := startTrust(t, e); err != nil {
		t.Fatal(err)
	}
	m := hashcache.Read(hashCachePath(e.home))
	entry := m[e.path]
	entry.Ino++
	m[e.path] = entry
	if err := hashcache.Write(hashCachePath(e.home), m); err != nil {
		t.Fatal(err)
	}
	before := n.Load()
	if err := startTrust(t, e); err != nil {
		t.Fatal(err)
	}
	if n.Load() != before+1 {
		t.Fatal("an entry for another inode spared the hash")
	}
	if err := os.WriteFile(hashCachePath(e.home), []byte("agentnode-hashcache-v1\nnot a record"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := startTrust(t, e); err != nil {
		t.Fatalf("a corrupt cache broke the launch: %v", err)
	}
}

// A file changed less than hashcache.Settle before it was hashed is not cached:
// a later change within the same ctime tick could keep its stamps.
func TestHashCacheSkipsUnsettledFiles(t *testing.T) {
	n := countHashes(t)
	hashcache.Settle = time.Hour
	e := newEnv(t, "ok", true)
	for i := 0; i < 2; i++ {
		if err := startTrust(t, e); err != nil {
			t.Fatal(err)
		}
	}
	if got := n.Load(); got != 2 {
		t.Fatalf("hashed %d times, want 2 (nothing cached)", got)
	}
	if _, ok := hashcache.Read(hashCachePath(e.home))[e.path]; ok {
		t.Fatal("an unsettled file was cached")
	}
}
