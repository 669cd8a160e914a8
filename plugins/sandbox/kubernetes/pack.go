package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// MaxPackageBytes bounds a package sent to the cluster: a ConfigMap is at
// most 1 MiB in etcd, keys and the pod's manifest included.
const MaxPackageBytes = 768 << 10

// ErrPackageTooLarge refuses a package over MaxPackageBytes.
var ErrPackageTooLarge = errors.New("the package is too large for the kubernetes backend")

// ErrPackageShape refuses a package a ConfigMap cannot carry faithfully
// (symlinks, special files, names with newlines).
var ErrPackageShape = errors.New("the package cannot be sent to the cluster")

// ErrPackageNotVerified: the package the pod received is not the one the
// kernel verified; the tool was not started.
var ErrPackageNotVerified = errors.New("the package in the pod does not match the verified package")

// pack is a package directory as a ConfigMap's binaryData and the items
// projecting it at /pack, with the manifest the pod checks it against.
type pack struct {
	data     map[string][]byte
	items    []corev1.KeyToPath
	manifest string // "<sha256 hex>  ./<path>\n" per file, sha256sum -c's format
}

// readPack reads dir: regular files and directories only, at most
// MaxPackageBytes in all. Executable files keep mode 0555, the others
// 0444 (ConfigMap volumes carry no owner; the tool reads them as uid 1000
// through the mode).
func readPack(dir string) (*pack, error) {
	p := &pack{data: map[string][]byte{}}
	var total int64
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%w: %s is not a regular file", ErrPackageShape, rel)
		}
		if strings.ContainsAny(rel, "\n\r\\") || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("%w: file name %q", ErrPackageShape, rel)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size() + int64(len(rel)) + 80
		if total > MaxPackageBytes {
			return fmt.Errorf("%w: more than %d bytes", ErrPackageTooLarge, MaxPackageBytes)
		}
		content, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		key := "f" + strconv.Itoa(len(p.items))
		mode := int32(0o444)
		if info.Mode().Perm()&0o111 != 0 {
			mode = 0o555
		}
		p.data[key] = content
		p.items = append(p.items, corev1.KeyToPath{Key: key, Path: filepath.ToSlash(rel), Mode: &mode})
		sum := sha256.Sum256(content)
		b.WriteString(hex.EncodeToString(sum[:]) + "  ./" + filepath.ToSlash(rel) + "\n")
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: package: %w", err)
	}
	p.manifest = b.String()
	return p, nil
}

// verifyScript runs in the init container: every file of the manifest
// (AGENTNODE_PACK_SHA256, in the immutable pod spec) must match what the
// volume holds. The manifest names every projected item, and the volume
// holds only those. The image's busybox computes the digests.
const verifyScript = `cd /pack || exit 1
[ -z "$AGENTNODE_PACK_SHA256" ] && exit 0
printf '%s' "$AGENTNODE_PACK_SHA256" | /bin/busybox sha256sum -c -s - || { echo "agentnode: package digest mismatch" >&2; exit 1; }`

// gateScript is the tool container's pid 1 until the start gate opens: it
// reads one line (the backend sends a lone newline first, once attached),
// then execs the tool, so the tool writes nothing before the host listens.
const gateScript = `IFS= read -r _ || exit 126
exec "$@"`
