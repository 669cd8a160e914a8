package image

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/hashcache"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/treehash"
	"github.com/agentnode/agentnode/sdk/treewatch"
)

// maxMarker bounds a rootfs marker.
const maxMarker = 64 << 10

// Marker is the tree-hash record beside an unpacked rootfs, written by the
// front end that unpacked it (cmd/agentnode/imagebuild) and checked before
// every run.
type Marker struct {
	Manifest string    `json:"manifest"` // sha256:...
	DiffIDs  []v1.Hash `json:"diff_ids"` // the layers it was unpacked from
	Tree     string    `json:"tree"`     // sha256:... of TreeHash
}

// verifyRootfs checks the unpacked rootfs of manifest mhex against its
// marker and the image config.
func verifyRootfs(homeDir, mhex string, cfg *v1.ConfigFile, seals *treewatch.Seals) error {
	dir := RootfsDir(homeDir, mhex)
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return reason.New(reason.SandboxUnavailable,
			"%s: the rootfs of image sha256:%s is not unpacked at %s; run `agentnode sandbox build`", ImageMissing, mhex, dir)
	}
	if err != nil {
		return reason.New(reason.SandboxUnavailable, "%s: rootfs %s: %w", ImageMissing, dir, err)
	}
	if !fi.IsDir() {
		return reason.New(reason.ImageDigestMismatch, "rootfs %s is not a directory", dir)
	}
	mp := MarkerPath(homeDir, mhex)
	data, err := bounded.ReadFile(mp, maxMarker) // no symlink, FIFO or device
	if err != nil {
		return reason.New(reason.ImageDigestMismatch,
			"rootfs %s cannot be verified: %w; rebuild with `agentnode sandbox build`", dir, err)
	}
	var m Marker
	if err := json.Unmarshal(data, &m); err != nil {
		return reason.New(reason.ImageDigestMismatch, "rootfs marker %s is invalid: %w", mp, err)
	}
	if m.Manifest != "sha256:"+mhex {
		return reason.New(reason.ImageDigestMismatch, "rootfs marker %s is for %s, not sha256:%s", mp, m.Manifest, mhex)
	}
	if !sameHashes(m.DiffIDs, cfg.RootFS.DiffIDs) {
		return reason.New(reason.ImageDigestMismatch, "rootfs %s was unpacked from layers %v, the image has %v",
			dir, m.DiffIDs, cfg.RootFS.DiffIDs)
	}
	return seals.Verify(dir, m.Tree, func() error {
		tree, err := TreeHash(dir, hashcache.Shared(HashCachePath(homeDir, mhex)))
		if err != nil {
			return reason.New(reason.ImageDigestMismatch, "rootfs %s: %w", dir, err)
		}
		if tree != m.Tree {
			return reason.New(reason.ImageDigestMismatch,
				"rootfs %s was modified: tree hash %s, recorded %s; rebuild with `agentnode sandbox build`", dir, tree, m.Tree)
		}
		return nil
	})
}

func sameHashes(a, b []v1.Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TreeHash hashes the tree at dir in kernel/treehash's Rootfs format:
// every entry's relative path, type, permission bits (with setuid, setgid,
// sticky), owner and group, and content (a regular file's size and
// sha256, a symlink's target). Any other file type is an error. A missing
// dir wraps fs.ErrNotExist. A file's digest comes from cache, when not
// nil, if the file provably did not change since it was hashed
// (kernel/hashcache); everything else is read every time.
func TreeHash(dir string, cache *hashcache.Cache) (string, error) {
	return treehash.Hash(dir, treehash.Rootfs, treehash.Options{Cache: cache})
}

// HashCachePath is the cache of the digests of the files of the rootfs of
// image manifestHex (kernel/hashcache), in agentnode's state directory: the
// check before every run (Resolve) reads only the files that changed since
// they were last hashed. One file per image, so that a run reads the
// entries of its own image only.
func HashCachePath(homeDir, manifestHex string) string {
	return filepath.Join(home.StateDir(homeDir), "image-hashes", manifestHex)
}
