// Package pyimage builds agentnode's Python runtime image, offline and
// reproducibly: the default sandbox image's content (cmd/agentnode/imagebuild: busybox,
// the /etc files, the mount points, the egress forwarder) plus Debian's
// Python 3 interpreter and standard library with the shared libraries they
// load, taken file by file from the packages installed on this host as
// dpkg's database lists them (admin/info/<pkg>.list; cmd/agentnode/debimage), each regular file
// checked against the package's checksum (<pkg>.md5sums, or the status
// file's Conffiles) before it goes in, and the tool and agent shims of
// sdk/python at python.ShimPath and python.AgentShimPath. Nothing is downloaded. The same
// installed package versions and the same shim give the same digests.
// specs/python.md describes the image.
package pyimage

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/agentnode/agentnode/cmd/agentnode/debimage"
	"github.com/agentnode/agentnode/cmd/agentnode/imagebuild"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/sdk/python"
)

// Name is the repository name of the Python runtime image.
const Name = "agentnode/python"

// DefaultRoots are the packages the image is built from, with everything
// they depend on: python3-minimal (the interpreter, /usr/bin/python3) and
// libpython3-stdlib (the whole standard library of Debian's default
// Python 3 version).
var DefaultRoots = []string{"python3-minimal", "libpython3-stdlib"}

// Options are the inputs of Build.
type Options struct {
	// Base names the busybox and egress forwarder of the default image's
	// content (kernel/imagebuild.BuildOptions).
	Base imagebuild.BuildOptions
	// Root is the filesystem the packages are installed in; empty means
	// "/".
	Root string
	// Admin is dpkg's database; empty means Root/var/lib/dpkg.
	Admin string
	// Roots are the packages to take, with their dependencies; empty means
	// DefaultRoots.
	Roots []string
	// Arch is the dpkg architecture of the packages; empty means this
	// program's (amd64, arm64: Go and Debian spell them alike).
	Arch string
	// Progress, when set, is told what Build does next (a line without
	// its newline); building takes tens of seconds, most of it
	// compressing the layer.
	Progress func(step string)
	// Name is the image's repository name; empty means Name.
	Name string
	// Exclude are paths (as the packages list them) left out of the
	// image with everything below them: neither read nor checked.
	Exclude []string
	// CABundle, when set, is the image path of a certificate bundle
	// built from Debian's ca-certificates package (which must be among
	// the packages): its *.crt files under /usr/share/ca-certificates,
	// each checked against the package's md5sums, concatenated in name
	// order. The host's own bundle and /etc/ca-certificates.conf are not
	// read, so the same package version gives the same bundle.
	CABundle string
}

// Package is one package that went into the image.
type Package = debimage.Package

// The errors of the package checks (debimage): a file that does not match
// its package's checksum, a package the dpkg database cannot give.
var (
	ErrChecksum = debimage.ErrChecksum
	ErrPackage  = debimage.ErrPackage
)

// Contents is what Collect took.
type Contents struct {
	Packages []Package `json:"packages"`
	// Skipped are Essential packages reached through dependencies and not
	// followed (dpkg: the interpreter never loads them).
	Skipped []string `json:"skipped"`
	Files   int      `json:"files"` // regular files, the shim and bytecode included
	// Bytecode is how many of Files are compiled modules
	// (__pycache__/*.pyc), which no package lists: the standard library's,
	// and of those DistBytecode in Debian's dist-packages (pip and its
	// dependencies in the installer image).
	Bytecode     int   `json:"bytecode"`
	DistBytecode int   `json:"dist_bytecode"`
	Entries      int   `json:"entries"` // files, directories and symlinks
	Bytes        int64 `json:"bytes"`   // size of the regular files
	// Certificates is how many certificates the CA bundle holds (0:
	// none built).
	Certificates int `json:"certificates,omitempty"`
}

// Collect reads the packages of opts from the dpkg database
// (debimage.Collect) and returns the image's files besides the default
// image's content: the packages' files in the merged-/usr layout, the
// shims and the bytecode of the standard library and the shims.
func Collect(opts Options) ([]imagebuild.File, *Contents, error) {
	roots := opts.Roots
	if len(roots) == 0 {
		roots = DefaultRoots
	}
	files, deb, err := debimage.Collect(debimage.Options{Root: opts.Root, Admin: opts.Admin, Roots: roots,
		Arch: opts.Arch, Exclude: opts.Exclude, CABundle: opts.CABundle})
	if err != nil {
		return nil, nil, err
	}
	contents := &Contents{Packages: deb.Packages, Skipped: deb.Skipped, Certificates: deb.Certificates}
	root := opts.Root
	if root == "" {
		root = "/"
	}
	files = append(files, imagebuild.File{
		Name: strings.TrimPrefix(python.ShimPath, "/"), Type: tar.TypeReg, Mode: 0o644, Body: python.Shim,
	}, imagebuild.File{
		Name: strings.TrimPrefix(python.AgentShimPath, "/"), Type: tar.TypeReg, Mode: 0o644, Body: python.AgentShim,
	})
	pyc, err := compileStdlib(root, files)
	if err != nil {
		return nil, nil, err
	}
	contents.Bytecode = len(pyc)
	for _, f := range pyc {
		if under(f.Name, []string{distPackages}) {
			contents.DistBytecode++
		}
	}
	files = append(files, pyc...)
	for _, f := range files {
		contents.Entries++
		if f.Type == tar.TypeReg {
			contents.Files++
			contents.Bytes += int64(len(f.Body))
		}
	}
	return files, contents, nil
}

// Build collects the files (Collect) and builds the image Name from them
// on the default image's content (imagebuild.BuildDerived): written to the OCI
// layout of homeDir, unpacked and verified like the default image, addressed
// by its digest. The config's Cmd is the interpreter.
func Build(homeDir string, opts Options) (*image.Image, *Contents, error) {
	progress := opts.Progress
	if progress == nil {
		progress = func(string) {}
	}
	progress("reading and checking Debian's python3 packages (dpkg database, md5sums), compiling the standard library")
	files, contents, err := Collect(opts)
	if err != nil {
		return nil, nil, err
	}
	progress(fmt.Sprintf("%d packages, %d files, %.1f MB; compressing the layer, writing and unpacking the image",
		len(contents.Packages), contents.Files, float64(contents.Bytes)/1e6))
	name := opts.Name
	if name == "" {
		name = Name
	}
	img, err := imagebuild.BuildDerived(homeDir, opts.Base, imagebuild.Derived{
		Name:      name,
		Files:     files,
		Cmd:       []string{python.Interpreter},
		CreatedBy: createdBy(contents),
	})
	if err != nil {
		return nil, nil, err
	}
	return img, contents, nil
}

// createdBy is the history entry: the packages and versions, the shim's
// digest.
func createdBy(c *Contents) string {
	var b strings.Builder
	b.WriteString("agentnode python runtime: debian")
	for _, p := range c.Packages {
		fmt.Fprintf(&b, " %s=%s", p.Name, p.Version)
	}
	sum := sha256.Sum256(python.Shim)
	b.WriteString(", shim sha256:" + hex.EncodeToString(sum[:]))
	sum = sha256.Sum256(python.AgentShim)
	b.WriteString(", agent shim sha256:" + hex.EncodeToString(sum[:]))
	if c.Certificates > 0 {
		fmt.Fprintf(&b, ", CA bundle of %d certificates", c.Certificates)
	}
	if c.Bytecode > 0 {
		fmt.Fprintf(&b, ", standard library bytecode (%d unchecked hash-based .pyc)", c.Bytecode-c.DistBytecode)
	}
	if c.DistBytecode > 0 {
		fmt.Fprintf(&b, ", dist-packages bytecode (%d unchecked hash-based .pyc)", c.DistBytecode)
	}
	return b.String()
}
