package pluginhost

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/agentnode/agentnode/kernel/home"
)

// The verified-hash cache spares every `agentnode run` from reading each
// plugin binary again (13–20 MB, about 10 ms of SHA-256 per launch here)
// when nothing about the file changed since it was last hashed.
//
// An entry records the file's identity and change stamps (device, inode,
// size, mtime, ctime) as fstat reported them on the very descriptor that was
// hashed and then executed. It is used only when fstat of the newly opened
// descriptor matches every field and the recorded digest equals the pin. The
// kernel sets ctime to the current time on any change to a file's content or
// metadata and offers no way to set it back, and a replaced file has another
// inode, so a file that changed after it was hashed never matches. ctime has
// a coarse clock, so a change in the same tick as the hash could keep the
// stamp: entries are only recorded for files last changed at least
// hashSettle before hashing began, and the stamps are checked again after
// hashing.
//
// The cache is $AGENTNODE_HOME/state/plugin-hashes.json (0600). It is as
// trusted as pins.json: whoever can write one can write the other. A
// missing, corrupt or unwritable cache only means the binary is hashed again.
var hashSettle = 2 * time.Second // a variable for tests only

// HashCacheFile is the cache's file name in the state directory.
const HashCacheFile = "plugin-hashes.json"

// fileStamp is what identifies one version of a file.
type fileStamp struct {
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
}

// hashEntry is one cached digest.
type hashEntry struct {
	fileStamp
	SHA256 string `json:"sha256"`
}

func hashCachePath(homeDir string) string {
	return filepath.Join(home.StateDir(homeDir), HashCacheFile)
}

// readHashCache returns the cache's entries by binary path; nil when it
// cannot be read.
func readHashCache(homeDir string) map[string]hashEntry {
	data, err := os.ReadFile(hashCachePath(homeDir))
	if err != nil {
		return nil
	}
	var m map[string]hashEntry
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	return m
}

// cachedDigestMatches reports whether the cache vouches that the file with
// stamp st at path has the digest want.
func cachedDigestMatches(homeDir, path string, st fileStamp, want []byte) bool {
	if homeDir == "" {
		return false
	}
	e, ok := readHashCache(homeDir)[path]
	if !ok || e.fileStamp != st {
		return false
	}
	got, err := hex.DecodeString(e.SHA256)
	return err == nil && bytes.Equal(got, want)
}

// recordDigest stores the digest of the file at path, hashed starting at
// hashedAt with stamp before and stamp after. It records nothing unless the
// file was unchanged during hashing and had settled before it.
func recordDigest(homeDir, path string, before, after fileStamp, hashedAt time.Time, sum []byte) {
	if homeDir == "" || before != after || hashedAt.UnixNano()-before.CtimeNS < int64(hashSettle) {
		return
	}
	m := readHashCache(homeDir)
	if m == nil {
		m = map[string]hashEntry{}
	}
	m[path] = hashEntry{fileStamp: before, SHA256: hex.EncodeToString(sum)}
	// Keep only binaries that still exist, so the file stays small.
	for p := range m {
		if _, err := os.Lstat(p); err != nil {
			delete(m, p)
		}
	}
	data, err := json.Marshal(m)
	if err != nil {
		return
	}
	dir := home.StateDir(homeDir)
	if os.MkdirAll(dir, 0o700) != nil {
		return
	}
	tmp, err := os.CreateTemp(dir, ".plugin-hashes-*")
	if err != nil {
		return
	}
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return
	}
	if tmp.Close() != nil {
		return
	}
	// No fsync: losing the cache in a crash only costs a hash.
	ok = os.Rename(tmp.Name(), hashCachePath(homeDir)) == nil
}
