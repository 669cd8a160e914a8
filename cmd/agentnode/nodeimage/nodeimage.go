// Package nodeimage builds agentnode's Node runtime image, the image MCP
// servers started as [node, /pack/FILE, …] run on in the sandbox: the
// default sandbox image's content (cmd/agentnode/imagebuild) plus Debian's
// nodejs package and everything it depends on. The packages come from
// Debian's archive, not from this host's installed ones (a host may have
// another vendor's nodejs): their .deb files are downloaded by apt into a
// cache, each checked against the SHA256 of apt's signed index, unpacked
// into a private root without running any maintainer script, and taken
// file by file, each checked against its package's md5sums
// (cmd/agentnode/debimage). The same .deb files give the same digests.
// specs/image.md describes the image.
package nodeimage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentnode/agentnode/cmd/agentnode/debimage"
	"github.com/agentnode/agentnode/cmd/agentnode/imagebuild"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/image"
)

// Name is the repository name of the Node runtime image.
const Name = "agentnode/node"

// Interpreter is the image's node, which a [node, /pack/FILE] command
// starts (the image's PATH is /bin:/usr/bin).
const Interpreter = "/usr/bin/node"

// DefaultRoots are the packages the image is built from, with everything
// they depend on: Debian's nodejs (/usr/bin/node, with libnode and the
// JavaScript modules Debian builds it against).
var DefaultRoots = []string{"nodejs"}

// InstallerName is the repository name of the Node installer image, the
// image `agentnode install` runs `npm ci` in (cmd/agentnode/npmdeps).
const InstallerName = "agentnode/node-installer"

// InstallerRoots are the installer image's packages: the runtime image's
// and Debian's npm, with everything they depend on.
var InstallerRoots = []string{"nodejs", "npm"}

// NPM is the installer image's npm (Debian's, a script run by node).
const NPM = "/usr/bin/npm"

// CABundle is the installer image's certificate bundle, built from
// ca-certificates' certificates (npm depends on ca-certificates), whose
// files are left out: some have names a USTAR header cannot hold.
const CABundle = "/etc/ssl/certs/ca-certificates.crt"

// BuildInstaller builds the Node installer image: Build with
// InstallerRoots under InstallerName, ca-certificates' files replaced by
// CABundle (opts.Roots, Name, Exclude and CABundle are ignored). The same
// .deb files give the same digests.
func BuildInstaller(ctx context.Context, homeDir string, opts Options) (*image.Image, *Contents, error) {
	opts.Roots, opts.Name = InstallerRoots, InstallerName
	opts.exclude, opts.caBundle = []string{"/usr/share/ca-certificates"}, CABundle
	return Build(ctx, homeDir, opts)
}

// Options are the inputs of Build.
type Options struct {
	// Base names the busybox and egress forwarder of the default image's
	// content.
	Base imagebuild.BuildOptions
	// DebCache is where the .deb files are downloaded and kept; empty
	// means DebCacheDir(home).
	DebCache string
	// Roots are the packages to take, with their dependencies; empty
	// means DefaultRoots.
	Roots []string
	// Arch is the Debian architecture; empty means this program's.
	Arch string
	// Progress, when set, is told what Build does next.
	Progress func(step string)
	// Name is the image's repository name; empty means Name.
	Name string

	exclude  []string // debimage.Options.Exclude (BuildInstaller)
	caBundle string   // debimage.Options.CABundle (BuildInstaller)
}

// Contents is what went into the image: the packages (debimage.Collect's
// account) and the .deb files they came from.
type Contents struct {
	debimage.Contents
	Debs []debimage.Deb `json:"debs"`
}

// DebCacheDir is where Build keeps the downloaded .deb files by default.
func DebCacheDir(homeDir string) string {
	return filepath.Join(home.ImagesDir(homeDir), "debs")
}

// Build downloads the packages (debimage.Fetch), unpacks them into a
// private root (debimage.Unpack), collects their files (debimage.Collect)
// and builds the image on the default image's content
// (imagebuild.BuildDerived): written to the OCI layout of homeDir, unpacked
// and verified like the default image, addressed by its digest. The
// config's Cmd is the interpreter.
func Build(ctx context.Context, homeDir string, opts Options) (*image.Image, *Contents, error) {
	progress := opts.Progress
	if progress == nil {
		progress = func(string) {}
	}
	roots := opts.Roots
	if len(roots) == 0 {
		roots = DefaultRoots
	}
	cache := opts.DebCache
	if cache == "" {
		cache = DebCacheDir(homeDir)
	}
	progress("resolving Debian's " + strings.Join(roots, ", ") + " and its dependencies (apt), downloading the .deb files into " + cache)
	debs, err := debimage.Fetch(ctx, cache, roots, opts.Arch)
	if err != nil {
		return nil, nil, err
	}
	root, err := os.MkdirTemp("", "agentnode-nodeimage-*")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(root)
	progress(fmt.Sprintf("unpacking and checking %d packages (md5sums)", len(debs)))
	if err := debimage.Unpack(ctx, debs, root); err != nil {
		return nil, nil, err
	}
	files, deb, err := debimage.Collect(debimage.Options{Root: root, Roots: roots, Arch: opts.Arch,
		Exclude: opts.exclude, CABundle: opts.caBundle})
	if err != nil {
		return nil, nil, err
	}
	contents := &Contents{Contents: *deb, Debs: debs}
	progress(fmt.Sprintf("%d packages, %d files, %.1f MB; compressing the layer, writing and unpacking the image",
		len(contents.Packages), contents.Files, float64(contents.Bytes)/1e6))
	name := opts.Name
	if name == "" {
		name = Name
	}
	img, err := imagebuild.BuildDerived(homeDir, opts.Base, imagebuild.Derived{
		Name:      name,
		Files:     files,
		Cmd:       []string{Interpreter},
		CreatedBy: createdBy(contents),
	})
	if err != nil {
		return nil, nil, err
	}
	return img, contents, nil
}

// createdBy is the history entry: each package's version and the sha256 of
// its .deb.
func createdBy(c *Contents) string {
	var b strings.Builder
	b.WriteString("agentnode node runtime: debian")
	for _, d := range c.Debs {
		fmt.Fprintf(&b, " %s=%s (sha256:%s)", d.Name, d.Version, d.SHA256)
	}
	return b.String()
}
