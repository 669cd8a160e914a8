package imagebuild

import (
	"errors"
	"io/fs"
	"os"
	"strings"

	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/image"
)

// Status is `agentnode sandbox status`'s listing. It is here, not in
// kernel/image, because no run lists images: a run resolves the one it
// is pinned to (image.Resolve).

// Status lists the images in the OCI layout of homeDir, in index order. An
// absent layout is no images. The images are not verified: use image.Resolve on
// their Ref for that. ConfigDigest is empty when the manifest blob cannot be
// read.
func Status(homeDir string) ([]image.Image, error) {
	layoutDir := image.LayoutDir(homeDir)
	idx, err := image.ReadIndex(layoutDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []image.Image
	for _, d := range idx.Manifests {
		if d.Digest.Algorithm != "sha256" || !image.IsImageManifest(d.MediaType) {
			continue
		}
		repo := image.DefaultName
		if n := d.Annotations[image.RefNameAnnotation]; n != "" {
			if i := strings.LastIndex(n, ":"); i > strings.LastIndex(n, "/") {
				n = n[:i]
			}
			repo = n
		}
		img := image.Image{
			Ref:            repo + "@" + d.Digest.String(),
			Name:           repo,
			ManifestDigest: d.Digest.String(),
			Layout:         layoutDir,
			Store:          home.ImagesDir(homeDir),
		}
		if fi, err := os.Lstat(image.RootfsDir(homeDir, d.Digest.Hex)); err == nil && fi.IsDir() {
			img.Rootfs = image.RootfsDir(homeDir, d.Digest.Hex)
		}
		if m, err := image.ReadManifest(layoutDir, d.Digest.Hex); err == nil {
			img.ConfigDigest = m.Config.Digest.String()
		}
		out = append(out, img)
	}
	return out, nil
}
