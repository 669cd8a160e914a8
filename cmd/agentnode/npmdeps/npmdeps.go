// Package npmdeps installs an npm MCP server's dependency tree at
// `agentnode install`, never at run time: an mcp_server package whose
// mcp_server.install names an exact npm package version and which ships a
// package.json and a package-lock.json but no node_modules gets its tree
// installed by `npm ci --ignore-scripts` inside a sandbox (the configured
// backend's Run, the Node installer image built by cmd/agentnode/nodeimage),
// offline from an npm cache directory the user names, mounted read-only at
// /pack. The lockfile is checked on the host first (Check): lockfileVersion
// 2 or 3, its root depending on exactly the manifest's package@version,
// every package with an integrity hash, none needing an install script.
// The tree comes back as a tar on the sandbox's stdout and is unpacked with
// cmd/agentnode/tarsafe, under caps, into the staging copy of the package
// at store.DepsDir/node_modules, which the store hashes apart
// (store.Package.DepsHash), seals in the lockfile and verifies before every
// run. It sits beside cmd/agentnode/pydeps, which does the same for Python
// toolpacks with pip. specs/mcp.md describes it.
package npmdeps

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentnode/agentnode/cmd/agentnode/nodeimage"
	"github.com/agentnode/agentnode/cmd/agentnode/pydeps"
	"github.com/agentnode/agentnode/cmd/agentnode/tarsafe"
	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/python"
	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// ErrLock is wrapped by every refusal of the package's npm files: no
// package-lock.json, one npm ci cannot install exactly (an old
// lockfileVersion, a root that does not depend on the manifest's pinned
// package, an entry without an integrity hash or from a git, file or link
// source) or one that needs an install script. Those errors carry
// mcp_unpinned; `agentnode install` exits 2 for them.
var ErrLock = errors.New("the npm dependencies cannot be installed")

// Files at the top of the package.
const (
	PackageJSON = "package.json"
	LockFile    = "package-lock.json"
	ModulesDir  = "node_modules"
)

// MaxLockBytes bounds package.json and package-lock.json.
const MaxLockBytes = 16 << 20

// Needed reports whether the package in dir gets its npm tree installed:
// an mcp_server whose mcp_server.install.manager is npm, with a
// package.json or a package-lock.json at its top and no node_modules
// there (a node_modules shipped in the package is the preinstalled case:
// nothing is installed).
func Needed(dir string, m *manifest.Manifest) bool {
	if m == nil || m.PackageType != manifest.TypeMCPServer || m.MCP == nil || m.MCP.Install == nil || m.MCP.Install.Manager != "npm" {
		return false
	}
	if _, err := os.Lstat(filepath.Join(dir, ModulesDir)); err == nil {
		return false
	}
	for _, f := range []string{PackageJSON, LockFile} {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			return true
		}
	}
	return false
}

// lockEntry is what is read of one entry of package-lock.json's packages.
type lockEntry struct {
	Version          string            `json:"version"`
	Resolved         string            `json:"resolved"`
	Integrity        string            `json:"integrity"`
	Link             bool              `json:"link"`
	InBundle         bool              `json:"inBundle"`
	HasInstallScript bool              `json:"hasInstallScript"`
	Dependencies     map[string]string `json:"dependencies"`
}

type lockDoc struct {
	LockfileVersion int                  `json:"lockfileVersion"`
	Packages        map[string]lockEntry `json:"packages"`
}

// integrityRE is an SRI hash npm accepts for a registry tarball (sha512,
// or sha1 for old packages).
var integrityRE = regexp.MustCompile(`^(sha512-[A-Za-z0-9+/]{86}==|sha1-[A-Za-z0-9+/]{27}=)( .*)?$`)

// Check reads package.json and package-lock.json at the top of dir and
// refuses (ErrLock, mcp_unpinned) what npm ci could not install exactly
// as locked, or only by running package code. It returns the installed
// packages as "name@version", sorted.
func Check(dir string, in *manifest.MCPInstall) ([]string, error) {
	refuse := func(format string, args ...any) error {
		return reason.New(reason.MCPUnpinned, "%w: "+format, append([]any{ErrLock}, args...)...)
	}
	if _, err := bounded.ReadFile(filepath.Join(dir, PackageJSON), MaxLockBytes); err != nil {
		return nil, refuse("%s: %w (npm ci installs from a package.json and its package-lock.json)", PackageJSON, err)
	}
	data, err := bounded.ReadFile(filepath.Join(dir, LockFile), MaxLockBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, refuse("the package has a %s and no node_modules but no %s: an unlocked tree is not installed; lock it with `npm install --package-lock-only --ignore-scripts` and ship the lockfile",
			PackageJSON, LockFile)
	}
	if err != nil {
		return nil, refuse("%s: %w", LockFile, err)
	}
	var doc lockDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, refuse("%s: %w", LockFile, err)
	}
	if doc.LockfileVersion != 2 && doc.LockfileVersion != 3 {
		return nil, refuse("%s: lockfileVersion %d: only 2 and 3 list every package with its integrity (npm 7 or later writes them)", LockFile, doc.LockfileVersion)
	}
	root, ok := doc.Packages[""]
	if !ok {
		return nil, refuse("%s: no root entry (packages[\"\"])", LockFile)
	}
	if got := root.Dependencies[in.Package]; got != in.Version {
		return nil, refuse("%s: the root depends on %s@%q, the manifest's mcp_server.install pins %s@%s: the lock must depend on exactly that version",
			LockFile, in.Package, got, in.Package, in.Version)
	}
	if top := doc.Packages[ModulesDir+"/"+in.Package]; top.Version != in.Version {
		return nil, refuse("%s: %s/%s is version %q, the manifest pins %s", LockFile, ModulesDir, in.Package, top.Version, in.Version)
	}
	var installed []string
	for key, e := range doc.Packages {
		if key == "" {
			continue
		}
		name := key[strings.LastIndex(key, ModulesDir+"/")+len(ModulesDir)+1:]
		switch {
		case !strings.HasPrefix(key, ModulesDir+"/") || strings.Contains(key, ".."):
			return nil, refuse("%s: entry %q is not in node_modules (a workspace or local package)", LockFile, key)
		case e.Link:
			return nil, refuse("%s: %s is a link to a local directory, not a registry package", LockFile, key)
		case e.HasInstallScript:
			return nil, refuse("%s: %s@%s needs an install script (hasInstallScript): agentnode installs with scripts disabled and does not run package code at install; this server cannot be installed",
				LockFile, name, e.Version)
		case e.InBundle:
			// Inside its parent's tarball, which the parent's integrity covers.
		case e.Integrity == "":
			return nil, refuse("%s: %s@%s has no integrity hash: every package must be locked to its content", LockFile, name, e.Version)
		case !integrityRE.MatchString(e.Integrity):
			return nil, refuse("%s: %s@%s: integrity %q is not a sha512 (or sha1) hash", LockFile, name, e.Version, e.Integrity)
		case e.Resolved != "" && !strings.HasPrefix(e.Resolved, "https://"):
			return nil, refuse("%s: %s@%s is resolved from %q, not from a registry over https (git, file and link sources are not installed)",
				LockFile, name, e.Version, e.Resolved)
		}
		installed = append(installed, name+"@"+e.Version)
	}
	sort.Strings(installed)
	return installed, nil
}

// Installer installs a package's locked npm tree in a sandbox.
type Installer struct {
	Sandbox pydeps.Runner
	Backend string       // the backend's name, for messages
	Image   *image.Image // the Node installer image, resolved
	// Cache is the host's npm cache directory (npm's, holding _cacache):
	// the lock's tarballs and their index entries are copied from it
	// (selectCache) into a private directory mounted read-only at /pack
	// and copied to the container's /tmp for npm, which writes to its
	// cache.
	Cache string
	// Registry, instead of Cache, is the npm registry's URL (https, port
	// 443) npm ci downloads the locked tarballs from, through the sealed
	// egress proxy whose socket is EgressSocket (allowing the registry's
	// host alone; the caller starts and stops it).
	Registry     string
	EgressSocket string
	// CertPEM, when set, are the only certificates trusted for the
	// registry's TLS (pydeps.ReadCert: --npm-cert); else the installer
	// image's CA bundle.
	CertPEM []byte
	Limits  sandbox.Limits // raised to pydeps.MinTmpBytes and MinMemoryBytes
	Timeout time.Duration
	Caps    pydeps.Caps // zero: pydeps.DefaultCaps
	RunID   string      // the container's name ("" gives one from the time)
}

// workDir is where npm ci runs inside the container.
const workDir = "/tmp/agentnode-npm"

// NPMArgs are npm ci's options: the lock exactly, no lifecycle scripts,
// offline from the copied cache, no audit, funding or update check, no
// user or global configuration.
var NPMArgs = []string{"ci", "--ignore-scripts", "--offline", "--no-audit", "--no-fund", "--no-update-notifier",
	"--cache", "/tmp/npm-cache", "--userconfig", "/tmp/home/.npmrc", "--globalconfig", "/tmp/npmrc", "--loglevel", "warn"}

// MaxTunnels bounds npm's connections to the registry at once. npm 9
// (Debian's, in the installer image) reaches a registry behind a proxy
// through https-proxy-agent 5 on agent-base 6, which pools nothing and
// ignores maxsockets: every request opens a CONNECT tunnel of its own,
// closed after its answer, and npm ci fetches every tarball of the lock
// at once, so a tree of 99 packages opens some 99 tunnels together, over
// the egress proxy's limit (64) on one sandbox's concurrent connections
// (measured from the proxy's audit: 99 tunnels for 99 tarballs, each
// closed by both ends within a second; none idle, none reused).
// npm is therefore pointed at a second forwarder (queueAddr) that forwards
// at most MaxTunnels of them at once and lets the others wait, unaccepted;
// the proxy's limit stays what it is.
const MaxTunnels = 16

// queueAddr is where that forwarder listens inside the container, beside
// the sandbox's own (profile.EgressListenAddr), to the same egress socket.
const queueAddr = "127.0.0.1:3129"

// registryCertName is --npm-cert's copy in the directory mounted at /pack.
const registryCertName = "npm-registry-ca.pem"

// registryArgs replace --offline when the tarballs come from a registry:
// that registry only, through the queueing forwarder (the proxy npm is
// told explicitly, not left to the environment), trusting the image's CA
// bundle or --npm-cert's certificates alone, without retries (a refusal by
// the proxy is final).
func (in *Installer) registryArgs() []string {
	ca := pydeps.CABundle
	if len(in.CertPEM) > 0 {
		ca = "/pack/" + registryCertName
	}
	return []string{"--registry", in.Registry, "--proxy", "http://" + queueAddr, "--https-proxy", "http://" + queueAddr,
		"--cafile", ca, "--fetch-retries", "0"}
}

// script unpacks package.json and package-lock.json from stdin, copies
// the cache (from a registry: starts an empty one and runs npm behind the
// queueing forwarder), runs npm ci (its output to stderr) and streams
// node_modules as a tar on stdout. tar and cp are busybox's (the image
// links only a few applets by name).
func (in *Installer) script() string {
	args, fill, wrap := NPMArgs, "/bin/busybox cp -R /pack /tmp/npm-cache\n", ""
	if in.Registry != "" {
		args = append(slices.DeleteFunc(slices.Clone(NPMArgs), func(a string) bool { return a == "--offline" }), in.registryArgs()...)
		fill = "mkdir -p /tmp/npm-cache\n"
		wrap = profile.EgressForwarderPath + " -listen " + queueAddr + " -socket " + profile.EgressSocketPath +
			" -max-active " + strconv.Itoa(MaxTunnels) + " -- "
	}
	return "set -e\nmkdir -p " + workDir + " /tmp/home\ncd " + workDir + "\n/bin/busybox tar -xf -\n" + fill +
		"HOME=/tmp/home " + wrap + nodeimage.NPM + " " + strings.Join(args, " ") + " 1>&2\n" +
		"cd " + ModulesDir + "\nexec /bin/busybox tar -cf - .\n"
}

// Install checks the package's lock (Check), runs npm ci in the sandbox
// and unpacks node_modules into <content>/store.DepsDir/node_modules. It
// returns the installed packages ("name@version"). A sandbox that cannot
// run or prove its cleanup is sandbox_unavailable, a run past Timeout
// timeout, one the kernel killed for memory killed_memory.
func (in *Installer) Install(ctx context.Context, content string, m *manifest.Manifest) ([]string, error) {
	installed, err := Check(content, m.MCP.Install)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(filepath.Join(content, python.DepsDir)); err == nil {
		return nil, fmt.Errorf("%w: the package has a %s of its own: agentnode installs the npm tree there", ErrLock, python.DepsDir)
	}
	if in.Registry != "" && (in.Cache != "" || in.EgressSocket == "") {
		return nil, errors.New("npmdeps: a registry needs the egress socket and no cache")
	}
	if in.Registry == "" {
		if err := checkCache(in.Cache); err != nil {
			return nil, err
		}
	}
	stdin, lock, err := lockTar(content)
	if err != nil {
		return nil, err
	}
	caps := in.Caps
	if caps == (pydeps.Caps{}) {
		caps = pydeps.DefaultCaps
	}
	cache, err := os.MkdirTemp("", "agentnode-npm-cache-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(cache)
	if err := os.Chmod(cache, 0o755); err != nil {
		return nil, err
	}
	if in.Registry == "" {
		if err := selectCache(in.Cache, cache, lock, caps.TotalBytes); err != nil {
			return nil, err
		}
	} else if len(in.CertPEM) > 0 {
		if err := os.WriteFile(filepath.Join(cache, registryCertName), in.CertPEM, 0o644); err != nil {
			return nil, err
		}
	}
	modules := filepath.Join(content, python.DepsDir, ModulesDir)
	if err := os.MkdirAll(modules, 0o700); err != nil {
		return nil, err
	}
	limits := in.Limits
	limits.TmpBytes = max(limits.TmpBytes, pydeps.MinTmpBytes)
	limits.MemoryBytes = max(limits.MemoryBytes, limits.TmpBytes+pydeps.MinMemoryBytes)
	runID := in.RunID
	if runID == "" {
		runID = fmt.Sprintf("an-npm-%d", time.Now().UnixNano())
	}
	pr, pw := io.Pipe()
	extracted := make(chan error, 1)
	go func() {
		err := tarsafe.Extract(modules, pr, tarsafe.Options{
			Tree: "the npm tree", MaxEntries: caps.Entries, MaxFileBytes: caps.FileBytes, MaxTotalBytes: caps.TotalBytes,
			Sync: true, RefuseTrailingData: true,
		})
		if err != nil {
			pr.CloseWithError(err)
		} else {
			pr.Close()
		}
		extracted <- err
	}()
	stderr := pydeps.NewTail(64 << 10)
	resp, runErr := in.Sandbox.Run(ctx, &sandbox.RunRequest{
		Spec: sandbox.Spec{
			RunID: runID, Image: in.Image.Ref, ImageStore: in.Image.Store, PackageDir: cache,
			Args:   []string{"/bin/sh", "-c", in.script()},
			Env:    []string{"TMPDIR=/tmp", "LC_ALL=C.UTF-8"},
			Limits: limits, Timeout: in.Timeout, Network: false, // a registry through EgressSocket only
			EgressSocket: in.EgressSocket,
		},
		Stdin: stdin, Stdout: pw, Stderr: stderr,
	})
	pw.Close()
	extractErr := <-extracted
	if err := pydeps.RunFailure(resp, runErr, extractErr, ErrLock, in.Backend, "the npm tree", in.Timeout, limits.MemoryBytes); err != nil {
		return nil, err
	}
	if resp.ExitCode != 0 {
		return nil, fmt.Errorf("%w: npm ci failed (exit %d) in the sandbox: %s; nothing was installed",
			ErrLock, resp.ExitCode, npmErrors(stderr.String()))
	}
	if _, err := os.Lstat(filepath.Join(modules, filepath.FromSlash(m.MCP.Install.Package), PackageJSON)); err != nil {
		return nil, fmt.Errorf("%w: npm ci did not install %s: %w", ErrLock, m.MCP.Install.Package, err)
	}
	return installed, nil
}

// checkCache requires the npm cache directory.
func checkCache(dir string) error {
	if dir == "" {
		return fmt.Errorf("%w: no npm cache: give one with --npm-cache DIR", ErrLock)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%w: npm cache: %w", ErrLock, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: npm cache %s is not a directory", ErrLock, dir)
	}
	return nil
}

// lockTar is a tar of package.json and package-lock.json (completed by
// withResolved), the sandbox's stdin, and that lock.
func lockTar(dir string) (io.Reader, []byte, error) {
	var buf bytes.Buffer
	var lock []byte
	tw := tar.NewWriter(&buf)
	for _, name := range []string{PackageJSON, LockFile} {
		data, err := bounded.ReadFile(filepath.Join(dir, name), MaxLockBytes)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %w", ErrLock, name, err)
		}
		if name == LockFile {
			if data, err = withResolved(data); err != nil {
				return nil, nil, fmt.Errorf("%w: %s: %w", ErrLock, name, err)
			}
			lock = data
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
			return nil, nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, nil, err
	}
	return &buf, lock, nil
}

// Registry is the npm registry whose tarball URLs complete a lock written
// without them.
const Registry = "https://registry.npmjs.org/"

// withResolved returns the lock with a resolved URL for every registry
// entry that has none: npm writes such locks with
// omit-lockfile-registry-resolved, and npm ci then asks the registry's
// metadata for each tarball's address, which an offline install from a
// cache cannot. The address is the registry's fixed one for a name and
// version (REGISTRY/NAME/-/BASENAME-VERSION.tgz); the entry's integrity
// still decides what is installed. Entries with a resolved URL, links and
// bundled entries are left as they are; a lock that needs nothing added is
// returned unchanged.
func withResolved(data []byte) ([]byte, error) {
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	pkgs, _ := doc["packages"].(map[string]any)
	changed := false
	for key, v := range pkgs {
		e, ok := v.(map[string]any)
		if key == "" || !ok || e["resolved"] != nil || e["link"] == true || e["inBundle"] == true {
			continue
		}
		version, _ := e["version"].(string)
		name, _ := e["name"].(string) // an alias names the real package
		if name == "" {
			name = key[strings.LastIndex(key, ModulesDir+"/")+len(ModulesDir)+1:]
		}
		if !validVersion.MatchString(version) || !validName.MatchString(name) {
			return nil, fmt.Errorf("%s has no version or no valid package name to find its tarball by", key)
		}
		e["resolved"] = Registry + name + "/-/" + name[strings.LastIndex(name, "/")+1:] + "-" + version + ".tgz"
		changed = true
	}
	if !changed {
		return data, nil
	}
	return json.MarshalIndent(doc, "", "  ")
}

// validName is an npm package name, scoped or not, as the registry
// accepts it (lower case, URL-safe).
var validName = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$`)

// validVersion is a semver version (build and prerelease parts included).
var validVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]*)?$`)

// npmErrors are npm's "npm ERR!"/"npm error" lines, else the last lines.
func npmErrors(stderr string) string {
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "npm ERR!") || strings.HasPrefix(l, "npm error") {
			lines = append(lines, strings.TrimSpace(l))
		}
		if len(lines) == 12 {
			break
		}
	}
	if len(lines) == 0 {
		all := strings.Split(strings.TrimSpace(stderr), "\n")
		lines = all[max(0, len(all)-5):]
	}
	return strings.Join(lines, "; ")
}
