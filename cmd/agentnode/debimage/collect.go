// Package debimage turns Debian packages into the files of a runtime
// image layer, the part the Python (cmd/agentnode/pyimage) and Node
// (cmd/agentnode/nodeimage) runtime images share: the dependency closure
// of some root packages in a dpkg database, each package's files as dpkg
// lists them in the merged-/usr layout, every regular file checked against
// the package's md5sums before it goes in (Collect); and, for an image
// built from Debian's archive rather than this host's installed packages,
// the .deb files downloaded by apt and unpacked into a private root with a
// dpkg database of its own (Fetch, Unpack), which Collect then reads. It
// sits in cmd/ beside imagebuild because building images is a front end's
// work: the kernel only verifies them (kernel/image).
package debimage

import (
	"archive/tar"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/agentnode/agentnode/cmd/agentnode/imagebuild"
)

// Options say which packages Collect takes, and from where.
type Options struct {
	// Root is the filesystem the packages are installed in; empty means
	// "/".
	Root string
	// Admin is dpkg's database; empty means Root/var/lib/dpkg.
	Admin string
	// Roots are the packages to take, with their dependencies.
	Roots []string
	// Arch is the dpkg architecture of the packages; empty means this
	// program's (amd64, arm64: Go and Debian spell them alike).
	Arch string
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
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Arch    string `json:"arch"`
	Files   int    `json:"files"` // regular files
	Bytes   int64  `json:"bytes"` // their size
}

// Contents is what Collect took.
type Contents struct {
	Packages []Package `json:"packages"`
	// Skipped are Essential packages reached through dependencies and not
	// followed (dpkg: the interpreter never loads them).
	Skipped []string `json:"skipped"`
	Files   int      `json:"files"`   // regular files
	Entries int      `json:"entries"` // files, directories and symlinks
	Bytes   int64    `json:"bytes"`   // size of the regular files
	// Certificates is how many certificates the CA bundle holds (0:
	// none built).
	Certificates int `json:"certificates,omitempty"`
}

// Collect reads the packages of opts from the dpkg database and returns the
// image's files besides the default image's content: the packages' files
// in the merged-/usr layout (with the /lib, /lib64, ... symlinks into /usr
// for those used), and the CA bundle when opts ask for one.
func Collect(opts Options) ([]imagebuild.File, *Contents, error) {
	root := opts.Root
	if root == "" {
		root = "/"
	}
	admin := opts.Admin
	if admin == "" {
		admin = filepath.Join(root, "var", "lib", "dpkg")
	}
	roots := opts.Roots
	if len(roots) == 0 {
		return nil, nil, fmt.Errorf("%w: no packages to take", ErrPackage)
	}
	arch := opts.Arch
	if arch == "" {
		arch = runtime.GOARCH
	}
	db, err := readStatus(admin, arch)
	if err != nil {
		return nil, nil, err
	}
	pkgs, skippedPkgs, err := db.closure(roots)
	if err != nil {
		return nil, nil, err
	}
	contents := &Contents{Skipped: skippedPkgs}
	if contents.Skipped == nil {
		contents.Skipped = []string{}
	}

	type listed struct {
		pkg  *dpkgPackage
		host string // the path as the package lists it
		sums map[string]string
	}
	byPath := map[string][]listed{} // canonical path → the packages listing it
	for _, p := range pkgs {
		paths, err := db.fileList(p)
		if err != nil {
			return nil, nil, err
		}
		sums, err := db.md5sums(p)
		if err != nil {
			return nil, nil, err
		}
		for _, hp := range paths {
			if excluded(opts.Exclude, hp) {
				continue
			}
			cp, _ := canonical(hp)
			byPath[cp] = append(byPath[cp], listed{pkg: p, host: hp, sums: sums})
		}
	}
	// A listed path with listed paths below it is a directory, whatever is
	// on the host (on a merged-/usr host /lib is a symlink to usr/lib).
	isParent := map[string]bool{}
	for cp := range byPath {
		for d := filepath.Dir(cp); d != "/"; d = filepath.Dir(d) {
			isParent[d] = true
		}
	}
	paths := make([]string, 0, len(byPath))
	for cp := range byPath {
		paths = append(paths, cp)
	}
	sort.Strings(paths)

	perPkg := map[string]*Package{}
	for _, p := range pkgs {
		perPkg[p.name] = &Package{Name: p.name, Version: p.version, Arch: p.arch}
	}
	var files []imagebuild.File
	movedFrom := map[string]bool{}
	for _, cp := range paths {
		ls := byPath[cp]
		l := ls[0]
		for _, x := range ls {
			if _, m := canonical(x.host); m != "" {
				movedFrom[m] = true
			}
		}
		name := strings.TrimPrefix(cp, "/")
		if isParent[cp] {
			files = append(files, imagebuild.File{Name: name, Type: tar.TypeDir, Mode: 0o755})
			continue
		}
		hostPath := filepath.Join(root, l.host)
		fi, err := os.Lstat(hostPath)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s lists %s: %w", ErrPackage, l.pkg.name, l.host, err)
		}
		if len(ls) > 1 && !fi.IsDir() {
			// Directories are listed by every package with files in
			// them; anything else belongs to one package.
			return nil, nil, fmt.Errorf("%w: %s is in %s and %s", ErrPackage, cp, ls[0].pkg.name, ls[1].pkg.name)
		}
		switch {
		case fi.IsDir():
			files = append(files, imagebuild.File{Name: name, Type: tar.TypeDir, Mode: 0o755})
		case fi.Mode()&os.ModeSymlink != 0:
			if _, hasSum := l.sums[l.host]; hasSum {
				return nil, nil, fmt.Errorf("%w: %s is a symlink, package %s has a file there", ErrChecksum, hostPath, l.pkg.name)
			}
			target, err := os.Readlink(hostPath)
			if err != nil {
				return nil, nil, err
			}
			files = append(files, imagebuild.File{Name: name, Type: tar.TypeSymlink, Mode: 0o777, Link: target})
		case fi.Mode().IsRegular():
			data, err := readVerified(hostPath, l.sums[l.host])
			if err != nil {
				return nil, nil, fmt.Errorf("package %s: %w", l.pkg.name, err)
			}
			mode := int64(0o644)
			if fi.Mode().Perm()&0o111 != 0 {
				mode = 0o755
			}
			files = append(files, imagebuild.File{Name: name, Type: tar.TypeReg, Mode: mode, Body: data})
			pp := perPkg[l.pkg.name]
			pp.Files++
			pp.Bytes += int64(len(data))
		default:
			return nil, nil, fmt.Errorf("%w: %s is a %s", ErrPackage, hostPath, fi.Mode().Type())
		}
	}
	for m := range movedFrom {
		if m != "bin" { // the base image's busybox directory
			files = append(files, imagebuild.File{Name: m, Type: tar.TypeSymlink, Mode: 0o777, Link: "usr/" + m})
		}
	}
	if opts.CABundle != "" {
		bundle, n, err := caBundle(db, pkgs, root, opts.CABundle, files)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, bundle...)
		contents.Certificates = n
	}
	for _, p := range pkgs {
		contents.Packages = append(contents.Packages, *perPkg[p.name])
	}
	for _, f := range files {
		contents.Entries++
		if f.Type == tar.TypeReg {
			contents.Files++
			contents.Bytes += int64(len(f.Body))
		}
	}
	return files, contents, nil
}

// caCertificatesPackage is the Debian package the CA bundle is built from,
// and caCertificatesDir where it keeps its certificates.
const (
	caCertificatesPackage = "ca-certificates"
	caCertificatesDir     = "/usr/share/ca-certificates/"
)

// caBundle returns the files of the CA bundle at path (Options.CABundle),
// with the directories above it that have no entry yet, and how
// many certificates it holds.
func caBundle(db *dpkgDB, pkgs []*dpkgPackage, root, path string, have []imagebuild.File) ([]imagebuild.File, int, error) {
	i := slices.IndexFunc(pkgs, func(p *dpkgPackage) bool { return p.name == caCertificatesPackage })
	if i < 0 {
		return nil, 0, fmt.Errorf("%w: the CA bundle %s is built from %s, which is not among the image's packages",
			ErrPackage, path, caCertificatesPackage)
	}
	p := pkgs[i]
	listed, err := db.fileList(p)
	if err != nil {
		return nil, 0, err
	}
	sums, err := db.md5sums(p)
	if err != nil {
		return nil, 0, err
	}
	var certs []string
	for _, hp := range listed {
		if strings.HasPrefix(hp, caCertificatesDir) && strings.HasSuffix(hp, ".crt") {
			certs = append(certs, hp)
		}
	}
	if len(certs) == 0 {
		return nil, 0, fmt.Errorf("%w: %s lists no certificate under %s", ErrPackage, caCertificatesPackage, caCertificatesDir)
	}
	sort.Strings(certs)
	var bundle []byte
	for _, hp := range certs {
		data, err := readVerified(filepath.Join(root, hp), sums[hp])
		if err != nil {
			return nil, 0, fmt.Errorf("package %s: %w", p.name, err)
		}
		bundle = append(bundle, data...)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			bundle = append(bundle, '\n')
		}
	}
	name := strings.TrimPrefix(path, "/")
	var out []imagebuild.File
	for d := filepath.Dir(name); d != "." && d != "/"; d = filepath.Dir(d) {
		if !slices.ContainsFunc(have, func(f imagebuild.File) bool { return f.Name == d }) {
			out = append([]imagebuild.File{{Name: d, Type: tar.TypeDir, Mode: 0o755}}, out...)
		}
	}
	out = append(out, imagebuild.File{Name: name, Type: tar.TypeReg, Mode: 0o644, Body: bundle})
	return out, len(certs), nil
}

// excluded reports whether p is one of paths or below one.
func excluded(paths []string, p string) bool {
	return slices.ContainsFunc(paths, func(x string) bool { return p == x || strings.HasPrefix(p, x+"/") })
}
