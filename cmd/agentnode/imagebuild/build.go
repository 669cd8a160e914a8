package imagebuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/agentnode/agentnode/cmd/agentnode/filelock"
	"github.com/agentnode/agentnode/cmd/agentnode/tarsafe"
	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/sdk/atomicfile"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// DefaultBusybox is where Debian's busybox-static installs busybox.
const DefaultBusybox = "/bin/busybox"

// maxBusybox bounds the busybox binary read into memory.
const maxBusybox = 64 << 20

// ForwarderName is the egress forwarder's file name in bin/, next to the
// agentnode executable (built by `make build` from sdk/sandbox/forwarder).
// It is not a plugin, so its name is not agentnode-<kind>-<name>
// (agentnode-egress-… names an egress plugin, specs/plugins.md).
const ForwarderName = "agentnode-forwarder"

// maxForwarder bounds the forwarder binary read into memory.
const maxForwarder = 32 << 20

// ErrNotStatic is returned by Build for a busybox that is not a statically
// linked ELF executable: it would not run in the image, which has no libc.
var ErrNotStatic = errors.New("busybox is not a statically linked executable")

// epoch is the only timestamp in the image: every tar entry's mtime, the
// config's created and the history entry's created (SOURCE_DATE_EPOCH=0).
var epoch = time.Unix(0, 0).UTC()

// Applets are the busybox applets linked into /bin (each /bin/<applet> is a
// symlink to busybox).
var Applets = []string{
	"cat", "dd", "echo", "env", "false", "grep", "head", "hostname", "id", "ls",
	"mkdir", "mount", "nc", "printf", "ps", "sed", "sh", "sleep", "test", "touch",
	"tr", "true", "uname", "wc", "whoami", "yes",
}

// Users and groups of the image: root and the sandbox user 1000:1000 the
// profile runs as.
const (
	passwdFile = "root:x:0:0:root:/:/bin/sh\nsandbox:x:1000:1000:sandbox:/sandbox-home:/bin/sh\n"
	groupFile  = "root:x:0:\nsandbox:x:1000:\n"
	hostsFile  = "127.0.0.1\tlocalhost\n::1\tlocalhost\n"
)

// emptyDirs are the directories of the image besides /bin, /etc and /usr:
// mount points the sandbox profile mounts over (they must exist, as the
// rootfs is read-only) and /usr/bin.
var emptyDirs = []string{"dev", "pack", "proc", "sandbox-home", "sys", "tmp"}

// BuildOptions are the inputs of Build besides the home directory.
type BuildOptions struct {
	// BusyboxPath is the statically linked busybox to copy into the image;
	// empty means DefaultBusybox.
	BusyboxPath string
	// ForwarderPath is the statically linked egress forwarder
	// (sdk/sandbox/forwarder) baked into the image at
	// profile.EgressForwarderPath; empty means ForwarderName next to the
	// running executable (bin/agentnode-forwarder beside
	// bin/agentnode).
	ForwarderPath string
}

// Build builds the default sandbox image from opts.BusyboxPath and
// opts.ForwarderPath, writes it into the OCI layout of homeDir (annotated
// with its tag), unpacks its rootfs for libcontainer and returns it. The
// same busybox and forwarder bytes always give the same image: building
// again is a no-op apart from repairing a layout blob or rootfs that no
// longer matches.
func Build(homeDir string, opts BuildOptions) (*image.Image, error) {
	bin, fwd, arch, err := readBaseInputs(opts)
	if err != nil {
		return nil, err
	}
	return buildFrom(homeDir, image.DefaultName, baseEntries(bin, fwd), arch, baseCreatedBy(bin, fwd), []string{"/bin/sh"})
}

// readBaseInputs reads and checks the default image's inputs named by opts:
// the static busybox and the static egress forwarder, of one architecture.
func readBaseInputs(opts BuildOptions) (bin, fwd []byte, arch string, err error) {
	bb := opts.BusyboxPath
	if bb == "" {
		bb = DefaultBusybox
	}
	if bin, arch, err = readBusybox(bb); err != nil {
		return nil, nil, "", err
	}
	fwdPath, err := forwarderPath(opts.ForwarderPath)
	if err != nil {
		return nil, nil, "", err
	}
	fwd, fwdArch, err := readStatic(fwdPath, "egress forwarder", maxForwarder,
		"build it with `make build` (CGO_ENABLED=0)")
	if err != nil {
		return nil, nil, "", err
	}
	if fwdArch != arch {
		return nil, nil, "", fmt.Errorf("egress forwarder %s is for %s, busybox for %s", fwdPath, fwdArch, arch)
	}
	return bin, fwd, arch, nil
}

// File is one entry that BuildDerived adds to the default image's content.
type File struct {
	// Name is the path in the image: relative, clean, no leading "/" or
	// "./"; a directory's may end in "/".
	Name string
	Type byte   // tar.TypeDir, tar.TypeReg or tar.TypeSymlink
	Mode int64  // permission bits (0o777 at most)
	Body []byte // a regular file's content
	Link string // a symlink's target
}

// Derived is an image built on the default image's content (BuildDerived).
type Derived struct {
	Name      string   // repository name, e.g. agentnode/python
	Files     []File   // added to the default image's entries
	Cmd       []string // the config's Cmd
	CreatedBy string   // what the history entry says about Files, after the base's inputs
}

// BuildDerived builds an image like Build, from the same busybox and
// forwarder (opts), holding the default image's entries plus d.Files in its
// one layer, and installs it as d.Name. A directory of d.Files that the
// default image has already is the same entry; any other name given twice
// is an error. Missing parent directories are added (0755). The same inputs
// give the same digests (specs/image.md's rules).
func BuildDerived(homeDir string, opts BuildOptions, d Derived) (*image.Image, error) {
	bin, fwd, arch, err := readBaseInputs(opts)
	if err != nil {
		return nil, err
	}
	if d.Name == "" || d.Name == image.DefaultName {
		return nil, fmt.Errorf("derived image: name %q is not a name of its own", d.Name)
	}
	entries, err := addFiles(baseEntries(bin, fwd), d.Files)
	if err != nil {
		return nil, fmt.Errorf("derived image %s: %w", d.Name, err)
	}
	return buildFrom(homeDir, d.Name, entries, arch, baseCreatedBy(bin, fwd)+"; "+d.CreatedBy, d.Cmd)
}

// addFiles returns base plus files, with missing parent directories.
func addFiles(base []tarEntry, files []File) ([]tarEntry, error) {
	byName := make(map[string]tarEntry, len(base)+len(files))
	key := func(e tarEntry) string { return strings.TrimSuffix(e.name, "/") }
	for _, e := range base {
		byName[key(e)] = e
	}
	out := base
	add := func(e tarEntry) error {
		if old, ok := byName[key(e)]; ok {
			if old.typ == tar.TypeDir && e.typ == tar.TypeDir {
				return nil
			}
			return fmt.Errorf("%s is in the image twice", key(e))
		}
		byName[key(e)] = e
		out = append(out, e)
		return nil
	}
	for _, f := range files {
		name := strings.TrimSuffix(f.Name, "/")
		if name == "" || strings.ContainsRune(name, 0) || name != path.Clean(name) || path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return nil, fmt.Errorf("%w: file name %q", ErrUnsafeLayer, f.Name)
		}
		if f.Mode&^0o777 != 0 {
			return nil, fmt.Errorf("%w: %s has mode %o", ErrUnsafeLayer, name, f.Mode)
		}
		e := tarEntry{name: name, typ: f.Type, mode: f.Mode}
		switch f.Type {
		case tar.TypeDir:
			e.name += "/"
		case tar.TypeReg:
			e.body = f.Body
		case tar.TypeSymlink:
			if err := checkSymlink(name, f.Link); err != nil {
				return nil, err
			}
			e.link = f.Link
		default:
			return nil, fmt.Errorf("%w: %s has type %s", ErrUnsafeLayer, name, tarsafe.TypeName(f.Type))
		}
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if err := add(tarEntry{name: d + "/", typ: tar.TypeDir, mode: 0o755}); err != nil {
				return nil, err
			}
		}
		if err := add(e); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// buildFrom writes entries as the image's one layer, with the fixed config
// (arch, createdBy in the history, cmd), and installs it as name.
func buildFrom(homeDir, name string, entries []tarEntry, arch, createdBy string, cmd []string) (*image.Image, error) {
	tarBytes, err := writeTar(entries)
	if err != nil {
		return nil, err
	}
	layer, err := newLayer(tarBytes)
	if err != nil {
		return nil, err
	}
	img, err := imageFor(layer, arch, createdBy, cmd)
	if err != nil {
		return nil, err
	}
	return store(homeDir, name, img, layer)
}

// baseCreatedBy names the default image's inputs in its history entry.
func baseCreatedBy(busybox, forwarder []byte) string {
	return "agentnode sandbox build: busybox " + sha256Hash(busybox).String() +
		", egress forwarder " + sha256Hash(forwarder).String()
}

// forwarderPath is p, or ForwarderName beside the running executable.
func forwarderPath(p string) (string, error) {
	if p != "" {
		return p, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("egress forwarder: locating the agentnode executable: %w", err)
	}
	return filepath.Join(filepath.Dir(exe), ForwarderName), nil
}

// readBusybox reads the busybox at path and checks that it is a statically
// linked ELF executable for a supported architecture. It returns the bytes
// and the image architecture (GOARCH spelling).
func readBusybox(path string) ([]byte, string, error) {
	data, arch, err := readStatic(path, "busybox", maxBusybox, "install busybox-static")
	if err != nil {
		return nil, "", err
	}
	if !bytes.Contains(data, []byte("BusyBox v")) {
		return nil, "", fmt.Errorf("%s is a static executable but not busybox", path)
	}
	return data, arch, nil
}

// readStatic reads the file at path (what names it in errors, at most max
// bytes) and checks that it is a statically linked ELF executable for a
// supported architecture; hint says how to get one. It returns the bytes
// and the architecture (GOARCH spelling).
func readStatic(path, what string, max int, hint string) ([]byte, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w (%s)", what, err, hint)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", what, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, "", fmt.Errorf("%s %s is not a regular file", what, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", what, err)
	}
	if len(data) > max {
		return nil, "", fmt.Errorf("%s %s is larger than %d bytes", what, path, max)
	}
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s %s is not an ELF file: %w", ErrNotStatic, what, path, err)
	}
	defer ef.Close()
	if ef.Type != elf.ET_EXEC && ef.Type != elf.ET_DYN {
		return nil, "", fmt.Errorf("%w: %s %s is an ELF %s, not an executable", ErrNotStatic, what, path, ef.Type)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			interp, _ := io.ReadAll(io.LimitReader(p.Open(), 4096))
			return nil, "", fmt.Errorf("%w: %s %s is dynamically linked (interpreter %s); %s",
				ErrNotStatic, what, path, strings.TrimRight(string(interp), "\x00"), hint)
		}
	}
	if libs, err := ef.ImportedLibraries(); err == nil && len(libs) > 0 {
		return nil, "", fmt.Errorf("%w: %s %s needs shared libraries %v; %s", ErrNotStatic, what, path, libs, hint)
	}
	switch ef.Machine {
	case elf.EM_X86_64:
		return data, "amd64", nil
	case elf.EM_AARCH64:
		return data, "arm64", nil
	}
	return nil, "", fmt.Errorf("%s %s is for %s, not amd64 or arm64", what, path, ef.Machine)
}

// tarEntry is one file of the image's layer.
type tarEntry struct {
	name string // relative, no leading "./"; directories end in "/"
	typ  byte
	mode int64
	body []byte
	link string
	uid  int // owner; 0 unless set
}

// egressEntries are the layer's entries for sealed egress: the forwarder
// at profile.EgressForwarderPath and an empty regular file at
// profile.EgressSocketPath, the mount point of the host's socket (the
// rootfs is read-only, and a runtime must not create it in the unpacked
// image), with their parent directories.
func egressEntries(forwarder []byte) []tarEntry {
	var out []tarEntry
	seen := map[string]bool{}
	parents := func(p string) {
		for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
			name := strings.TrimPrefix(d, "/") + "/"
			if !seen[name] {
				seen[name] = true
				out = append(out, tarEntry{name: name, typ: tar.TypeDir, mode: 0o755})
			}
		}
	}
	parents(profile.EgressForwarderPath)
	parents(profile.EgressSocketPath)
	return append(out,
		tarEntry{name: strings.TrimPrefix(profile.EgressForwarderPath, "/"), typ: tar.TypeReg, mode: 0o755, body: forwarder},
		tarEntry{name: strings.TrimPrefix(profile.EgressSocketPath, "/"), typ: tar.TypeReg, mode: 0o444},
	)
}

// baseEntries are the default image's entries.
func baseEntries(busybox, forwarder []byte) []tarEntry {
	dir := func(n string) tarEntry { return tarEntry{name: n + "/", typ: tar.TypeDir, mode: 0o755} }
	file := func(n string, mode int64, body string) tarEntry {
		return tarEntry{name: n, typ: tar.TypeReg, mode: mode, body: []byte(body)}
	}
	entries := []tarEntry{
		dir("bin"), dir("etc"), dir("usr"), dir("usr/bin"),
		{name: "bin/busybox", typ: tar.TypeReg, mode: 0o755, body: busybox},
		file("etc/passwd", 0o644, passwdFile),
		file("etc/group", 0o644, groupFile),
		file("etc/hosts", 0o644, hostsFile),
		// #!/usr/bin/env shebangs are common in tool packages.
		{name: "usr/bin/env", typ: tar.TypeSymlink, mode: 0o777, link: "/bin/busybox"},
	}
	for _, d := range emptyDirs {
		switch d {
		case "tmp":
			// 1777: runtimes that copy the image directory's mode onto the
			// tmpfs mounted there (runc 1.1, used by Debian's Docker and
			// Podman) must still give uid 1000 a writable /tmp.
			entries = append(entries, tarEntry{name: d + "/", typ: tar.TypeDir, mode: 0o1777})
		case "sandbox-home":
			entries = append(entries, tarEntry{name: d + "/", typ: tar.TypeDir, mode: 0o700, uid: 1000})
		default:
			entries = append(entries, dir(d))
		}
	}
	for _, a := range Applets {
		entries = append(entries, tarEntry{name: "bin/" + a, typ: tar.TypeSymlink, mode: 0o777, link: "busybox"})
	}
	for _, e := range egressEntries(forwarder) {
		// usr/ is there already.
		if !slices.ContainsFunc(entries, func(x tarEntry) bool { return x.name == e.name }) {
			entries = append(entries, e)
		}
	}
	return entries
}

// writeTar returns the layer's uncompressed tar: entries sorted by name,
// every entry owned by 0:0 (unless uid is set) with mtime epoch, USTAR
// format.
func writeTar(entries []tarEntry) ([]byte, error) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Typeflag: e.typ,
			Name:     e.name,
			Linkname: e.link,
			Mode:     e.mode,
			Size:     int64(len(e.body)),
			Uid:      e.uid,
			Gid:      e.uid,
			ModTime:  epoch,
			Format:   tar.FormatUSTAR,
		}
		// Writes to a bytes.Buffer cannot fail; a header error is a name or
		// link USTAR cannot hold (only possible for BuildDerived's files).
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("%w: tar header %s: %w", ErrUnsafeLayer, e.name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("tar body %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	return buf.Bytes(), nil
}

// layer is a gzip-compressed layer held in memory. Its gzip stream has no
// name and mtime 0 and is made by compress/gzip at BestCompression, so the
// same tar always gives the same digest with a given Go toolchain.
type layer struct {
	tar, gz        []byte
	digest, diffID v1.Hash
}

func newLayer(tarBytes []byte) (*layer, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, fmt.Errorf("gzip layer: %w", err)
	}
	// zw.Header is zero: no name, no comment, mtime 0.
	if _, err := zw.Write(tarBytes); err != nil {
		return nil, fmt.Errorf("gzip layer: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip layer: %w", err)
	}
	l := &layer{tar: tarBytes, gz: buf.Bytes()}
	l.digest = sha256Hash(l.gz)
	l.diffID = sha256Hash(l.tar)
	return l, nil
}

func sha256Hash(b []byte) v1.Hash {
	sum := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

func (l *layer) Digest() (v1.Hash, error) { return l.digest, nil }
func (l *layer) DiffID() (v1.Hash, error) { return l.diffID, nil }
func (l *layer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.gz)), nil
}
func (l *layer) Uncompressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.tar)), nil
}
func (l *layer) Size() (int64, error)                { return int64(len(l.gz)), nil }
func (l *layer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }

var _ v1.Layer = (*layer)(nil)

// imageFor assembles the image: OCI media types, a fixed config and the one
// layer.
func imageFor(l *layer, arch, createdBy string, cmd []string) (v1.Image, error) {
	cfg := &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		Config: v1.Config{
			User:       "1000:1000",
			Env:        []string{"PATH=/bin:/usr/bin"},
			WorkingDir: "/tmp",
			Cmd:        cmd,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: l,
		History: v1.History{
			Created:   v1.Time{Time: epoch},
			CreatedBy: createdBy,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	return img, nil
}

// store writes the built img into the layout of homeDir as name, records
// it in index.json and unpacks its rootfs (see install).
func store(homeDir, name string, img v1.Image, l *layer) (*image.Image, error) {
	rawCfg, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	rawManifest, err := img.RawManifest()
	if err != nil {
		return nil, fmt.Errorf("image manifest: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	return install(homeDir, name, rawManifest, rawCfg, cfg, []stagedLayer{{
		digest:       l.digest,
		compressed:   l.Compressed,
		uncompressed: l.Uncompressed,
	}})
}

// stagedLayer is a layer ready to be installed: its compressed blob and its
// uncompressed tar, both already checked against the manifest and config.
type stagedLayer struct {
	digest       v1.Hash
	compressed   func() (io.ReadCloser, error)
	uncompressed func() (io.ReadCloser, error)
}

// install stores an image under the images lock: it unpacks the rootfs
// first (staging, then rename), then writes the layer, config and manifest
// blobs, and records the image in index.json last, so an image is listed
// only once all of it is in place. Build and Pull both use it.
func install(homeDir, repo string, rawManifest, rawCfg []byte, cfg *v1.ConfigFile, layers []stagedLayer) (*image.Image, error) {
	imagesDir := home.ImagesDir(homeDir)
	if err := os.MkdirAll(imagesDir, 0o700); err != nil {
		return nil, fmt.Errorf("create images directory: %w", err)
	}
	unlock, err := filelock.Lock(filepath.Join(imagesDir, ".lock"))
	if err != nil {
		return nil, fmt.Errorf("lock images directory: %w", err)
	}
	defer unlock()

	layoutDir := image.LayoutDir(homeDir)
	if err := initLayout(layoutDir); err != nil {
		return nil, err
	}
	mDigest := sha256Hash(rawManifest)
	cDigest := sha256Hash(rawCfg)
	out := &image.Image{
		Ref:            repo + "@" + mDigest.String(),
		Name:           repo,
		ManifestDigest: mDigest.String(),
		ConfigDigest:   cDigest.String(),
		Layout:         layoutDir,
		Rootfs:         image.RootfsDir(homeDir, mDigest.Hex),
		Store:          home.ImagesDir(homeDir),
	}

	tars := make([]io.Reader, 0, len(layers))
	for _, l := range layers {
		rc, err := l.uncompressed()
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.digest, err)
		}
		defer rc.Close()
		tars = append(tars, rc)
	}
	if err := unpack(homeDir, mDigest.Hex, cfg.RootFS.DiffIDs, tars...); err != nil {
		return nil, err
	}
	for _, l := range layers {
		if err := writeBlobFrom(layoutDir, l.digest, l.compressed); err != nil {
			return nil, err
		}
	}
	for _, b := range [][]byte{rawCfg, rawManifest} {
		if err := writeBlob(layoutDir, b); err != nil {
			return nil, err
		}
	}
	desc := v1.Descriptor{
		MediaType:   types.OCIManifestSchema1,
		Digest:      mDigest,
		Size:        int64(len(rawManifest)),
		Annotations: map[string]string{image.RefNameAnnotation: out.Tag()},
		Platform:    &v1.Platform{Architecture: cfg.Architecture, OS: cfg.OS},
	}
	if m, err := v1.ParseManifest(bytes.NewReader(rawManifest)); err == nil && m.MediaType != "" {
		desc.MediaType = m.MediaType
	}
	if err := addToIndex(layoutDir, desc); err != nil {
		return nil, err
	}
	return out, nil
}

// initLayout creates the OCI layout's oci-layout file and an empty
// index.json if they are missing.
func initLayout(layoutDir string) error {
	if err := os.MkdirAll(filepath.Join(layoutDir, "blobs", "sha256"), 0o755); err != nil {
		return fmt.Errorf("create image layout: %w", err)
	}
	marker := filepath.Join(layoutDir, "oci-layout")
	if _, err := os.Stat(marker); errors.Is(err, fs.ErrNotExist) {
		if err := atomicfile.WriteFile(marker, []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
			return fmt.Errorf("create image layout: %w", err)
		}
	}
	idx := filepath.Join(layoutDir, "index.json")
	if _, err := os.Stat(idx); errors.Is(err, fs.ErrNotExist) {
		data, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{}})
		if err != nil {
			return fmt.Errorf("create image index: %w", err)
		}
		if err := atomicfile.WriteFile(idx, data, 0o644); err != nil {
			return fmt.Errorf("create image index: %w", err)
		}
	}
	return nil
}

// writeBlob stores b under its sha256 in the layout, atomically. A blob that
// is already there with the right content is left alone; one with other
// content is replaced.
func writeBlob(layoutDir string, b []byte) error {
	return writeBlobFrom(layoutDir, sha256Hash(b), func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	})
}

// writeBlobFrom streams the blob h from open into the layout: into a
// temporary file beside it, checked against h, synced and renamed. A blob
// already there with the right content is left alone.
func writeBlobFrom(layoutDir string, h v1.Hash, open func() (io.ReadCloser, error)) (err error) {
	p := image.BlobPath(layoutDir, h.Hex)
	// Only a regular file counts as there (a FIFO would block the open);
	// anything else is replaced.
	if f, err := bounded.Open(p, os.O_RDONLY, 0); err == nil {
		sum := sha256.New()
		_, cerr := io.Copy(sum, f)
		f.Close()
		if cerr == nil && hex.EncodeToString(sum.Sum(nil)) == h.Hex {
			return nil
		}
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("write blob %s: %w", h, err)
		}
	}()
	src, err := open()
	if err != nil {
		return err
	}
	defer src.Close()
	f, err := atomicfile.New(p, 0o644)
	if err != nil {
		return err
	}
	defer f.Abort()
	sum := sha256.New()
	if _, err = io.Copy(io.MultiWriter(f, sum), src); err != nil {
		return err
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != h.Hex {
		return fmt.Errorf("content hashes to sha256:%s", got)
	}
	return f.Commit()
}

// addToIndex adds desc to index.json unless a descriptor with the same digest
// and tag is there already. A corrupt index.json (image.Resolve refuses every
// image of it), or a symlink, FIFO or device in its place, is replaced by
// an index of desc alone: building or pulling again is how the layout is
// repaired, and the images it listed must be built or pulled again too.
func addToIndex(layoutDir string, desc v1.Descriptor) error {
	idx, err := image.ReadIndex(layoutDir)
	if errors.Is(err, image.ErrCorruptIndex) || errors.Is(err, bounded.ErrNotRegular) {
		idx, err = &v1.IndexManifest{}, nil
	}
	if err != nil {
		return err
	}
	for _, d := range idx.Manifests {
		if d.Digest == desc.Digest && d.Annotations[image.RefNameAnnotation] == desc.Annotations[image.RefNameAnnotation] {
			return nil
		}
	}
	if idx.SchemaVersion == 0 {
		idx.SchemaVersion = 2
	}
	if idx.MediaType == "" {
		idx.MediaType = types.OCIImageIndex
	}
	idx.Manifests = append(idx.Manifests, desc)
	data, err := json.Marshal(idx)
	if err != nil {
		return fmt.Errorf("write image index: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(layoutDir, "index.json"), data, 0o644); err != nil {
		return fmt.Errorf("write image index: %w", err)
	}
	return nil
}
