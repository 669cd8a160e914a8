package pyimage

import (
	"github.com/agentnode/agentnode/cmd/agentnode/pydeps"
	"github.com/agentnode/agentnode/kernel/image"
)

// InstallerName is the repository name of the Python installer image, in
// which `agentnode install` resolves a package's dependencies
// (cmd/agentnode/pydeps): the Python image's content plus Debian's pip.
const InstallerName = "agentnode/python-installer"

// InstallerRoots are DefaultRoots and python3-pip, with what it depends on
// (setuptools, wheel, distutils, ca-certificates, ...).
var InstallerRoots = append(append([]string{}, DefaultRoots...), "python3-pip")

// InstallerExclude are files of those packages left out: pip's vendored CA
// bundle, which hosts commonly rewrite to add their own authority (so it
// would fail its checksum), and ca-certificates' certificates (some have
// names a USTAR header cannot hold) — those go into the image as one
// bundle instead, at pydeps.CABundle, which pip is told to trust for an
// index (--cert).
var InstallerExclude = []string{
	"/usr/lib/python3/dist-packages/pip/_vendor/certifi/cacert.pem",
	"/usr/share/ca-certificates",
}

// InstallerOptions are opts for the installer image: its name, roots and
// exclusions (the other fields as given).
func InstallerOptions(opts Options) Options {
	opts.Name = InstallerName
	opts.Roots = InstallerRoots
	opts.Exclude = InstallerExclude
	opts.CABundle = pydeps.CABundle
	return opts
}

// BuildInstaller builds the Python installer image like Build.
func BuildInstaller(homeDir string, opts Options) (*image.Image, *Contents, error) {
	return Build(homeDir, InstallerOptions(opts))
}
