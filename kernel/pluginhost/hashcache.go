package pluginhost

import (
	"path/filepath"

	"github.com/agentnode/agentnode/kernel/home"
)

// The verified-hash cache (kernel/hashcache) spares every launch from
// reading each plugin binary again (13–20 MB, about 10 ms of SHA-256 per
// launch here) when nothing about the file changed since it was last hashed.
// pinnedRunner consults it on the very descriptor it then executes.

// HashCacheFile is the cache's file name in the state directory.
const HashCacheFile = "plugin-hashes"

func hashCachePath(homeDir string) string {
	return filepath.Join(home.StateDir(homeDir), HashCacheFile)
}
