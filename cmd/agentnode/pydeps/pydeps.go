// Package pydeps installs a Python package's dependencies at `agentnode
// install`, never at run time: the requirements of its pyproject.toml
// ([project].dependencies) are resolved and installed by Debian's pip
// inside a sandbox (the configured backend's Run, the Python installer
// image, no network), wheels only (--only-binary :all:, so no package code
// runs: no sdist is built), from a wheelhouse directory the user names,
// mounted read-only at /pack, or from a package index (PEP 503) reached
// only through the sealed egress proxy with the index's host alone
// allowlisted (Index: the caller starts the proxy). pip installs them `--target` a directory on
// the container's /tmp, which the sandbox streams back as a tar on its
// stdout; the host unpacks it with cmd/agentnode/tarsafe, under caps, into the
// staging copy of the package at python.DepsDir, where the shim finds
// them. The store hashes that directory apart (store.Package.DepsHash) and
// verifies it before every run. specs/python.md describes it.
package pydeps

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/agentnode/agentnode/cmd/agentnode/tarsafe"
	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/egress"
	"github.com/agentnode/agentnode/sdk/python"
	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// ErrDependencies is wrapped by every error about the dependencies
// themselves: a pyproject.toml that cannot be read, a requirement that is
// refused, no wheelhouse given, a requirement the wheelhouse cannot
// satisfy with wheels, files that are refused. `agentnode install` exits 2
// for them.
var ErrDependencies = errors.New("dependencies cannot be installed")

// PyprojectFile is the file the requirements are read from, at the top of
// the package.
const PyprojectFile = "pyproject.toml"

// Bounds of what is read and accepted.
const (
	MaxPyprojectBytes = 1 << 20
	MaxRequirements   = 256
	MaxRequirementLen = 512
)

// Caps bound the dependencies unpacked on the host.
type Caps struct {
	Entries    int
	FileBytes  int64
	TotalBytes int64
}

// DefaultCaps: 50,000 entries, 128 MiB a file, 512 MiB in all. The
// container's /tmp (sandbox.limits.tmp_size, at least MinTmpBytes here)
// bounds them first.
var DefaultCaps = Caps{Entries: 50000, FileBytes: 128 << 20, TotalBytes: 512 << 20}

// MinTmpBytes is the least /tmp an install gets, whatever
// sandbox.limits.tmp_size says; the memory limit is raised to hold it (a
// tmpfs is charged to the container's memory) plus MinMemoryBytes.
const (
	MinTmpBytes    = 256 << 20
	MinMemoryBytes = 256 << 20
)

// pyproject is what is read of pyproject.toml.
type pyproject struct {
	Project *struct {
		Name         string   `toml:"name"`
		Version      string   `toml:"version"`
		Dependencies []string `toml:"dependencies"`
		Dynamic      []string `toml:"dynamic"`
	} `toml:"project"`
}

// requirementRE is a PEP 508 requirement by name: a distribution name,
// optional extras, optional version specifiers, optional environment
// markers after ";". Direct references ("name @ URL") are not accepted:
// they name something outside the wheelhouse, and may be an sdist.
var requirementRE = regexp.MustCompile(`^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(\[[A-Za-z0-9._,\s-]*\])?\s*(\(?[\s<>=!~.,*A-Za-z0-9+]*\)?)\s*(;[^@\x00-\x1f\x7f]*)?$`)

// Requirements returns the dependencies a package declares: the
// [project].dependencies of pyproject.toml at the top of dir, for a
// `runtime: python` package; nil when it has none, no pyproject.toml or
// another runtime. A pyproject.toml that is not a regular file of at most
// MaxPyprojectBytes, not TOML, or declares its dependencies dynamic (a
// build backend would have to run to know them), and a requirement that
// is not a plain PEP 508 requirement by name, are errors wrapping
// ErrDependencies.
func Requirements(dir string, m *manifest.Manifest) ([]string, error) {
	pin := mcpPin(m)
	if m != nil && m.Runtime != manifest.RuntimePython && pin == nil {
		return nil, nil
	}
	name := filepath.Join(dir, PyprojectFile)
	data, err := bounded.ReadFile(name, MaxPyprojectBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrDependencies, PyprojectFile, err)
	}
	var pp pyproject
	if err := toml.Unmarshal(data, &pp); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrDependencies, PyprojectFile, err)
	}
	if pp.Project == nil {
		return nil, nil
	}
	if slices.Contains(pp.Project.Dynamic, "dependencies") {
		return nil, fmt.Errorf("%w: %s: [project].dynamic lists dependencies: agentnode does not run a build backend to learn them; declare them in [project].dependencies",
			ErrDependencies, PyprojectFile)
	}
	reqs := pp.Project.Dependencies
	if len(reqs) > MaxRequirements {
		return nil, fmt.Errorf("%w: %s: %d dependencies, more than %d", ErrDependencies, PyprojectFile, len(reqs), MaxRequirements)
	}
	for i, r := range reqs {
		r = strings.TrimSpace(r)
		reqs[i] = r
		if err := checkRequirement(r); err != nil {
			return nil, fmt.Errorf("%w: %s: [project].dependencies[%d] %q: %w", ErrDependencies, PyprojectFile, i, r, err)
		}
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	switch {
	case pin == nil:
	case normalize(pp.Project.Name) == normalize(pin.Package):
		// The package is the server's own project: its version is the pin.
		if pp.Project.Version != pin.Version {
			return nil, reason.New(reason.MCPUnpinned, "%w: %s: [project] is %s version %q, the manifest's mcp_server.install pins %s==%s",
				ErrDependencies, PyprojectFile, pp.Project.Name, pp.Project.Version, pin.Package, pin.Version)
		}
	default:
		if err := checkPinned(reqs, pin); err != nil {
			return nil, err
		}
	}
	return reqs, nil
}

// mcpPin is the pin of a Python MCP server (an mcp_server package whose
// mcp_server.install.manager is pypi), nil for any other package.
func mcpPin(m *manifest.Manifest) *manifest.MCPInstall {
	if m == nil || m.PackageType != manifest.TypeMCPServer || m.MCP == nil || m.MCP.Install == nil || m.MCP.Install.Manager != "pypi" {
		return nil
	}
	return m.MCP.Install
}

// checkPinned requires the dependencies of a package that wraps a Python
// MCP server (its pyproject.toml names another project) to hold its
// pinned distribution at exactly the pinned version (NAME==VERSION, no
// extras or markers): what the manifest pins is what gets installed.
func checkPinned(reqs []string, pin *manifest.MCPInstall) error {
	for _, r := range reqs {
		m := requirementRE.FindStringSubmatch(r)
		if m == nil || normalize(m[1]) != normalize(pin.Package) {
			continue
		}
		if strings.TrimSpace(m[2]) != "" || strings.TrimSpace(m[4]) != "" || strings.Join(strings.Fields(m[3]), "") != "=="+pin.Version {
			return reason.New(reason.MCPUnpinned, "%w: %s: [project].dependencies has %q, the manifest's mcp_server.install pins %s==%s: the server must be required at exactly that version",
				ErrDependencies, PyprojectFile, r, pin.Package, pin.Version)
		}
		return nil
	}
	return reason.New(reason.MCPUnpinned, "%w: %s: [project].dependencies does not require %s==%s, the server the manifest's mcp_server.install pins",
		ErrDependencies, PyprojectFile, pin.Package, pin.Version)
}

func checkRequirement(r string) error {
	switch {
	case r == "":
		return errors.New("empty")
	case len(r) > MaxRequirementLen:
		return fmt.Errorf("longer than %d bytes", MaxRequirementLen)
	case strings.Contains(strings.SplitN(r, ";", 2)[0], "@"):
		return errors.New("a direct reference (name @ URL): agentnode installs dependencies by name from the wheelhouse only")
	case !requirementRE.MatchString(r):
		return errors.New("not a PEP 508 requirement by name (NAME[EXTRAS] SPECIFIERS; MARKERS)")
	}
	return nil
}

// requirementName returns the distribution name of a checked requirement.
func requirementName(r string) string {
	if m := requirementRE.FindStringSubmatch(r); m != nil {
		return m[1]
	}
	return r
}

// normalize is PEP 503's name normalisation.
func normalize(name string) string {
	return strings.ToLower(regexp.MustCompile(`[-_.]+`).ReplaceAllString(name, "-"))
}

// Runner runs one sandboxed process (a sandbox backend's client).
type Runner interface {
	Run(ctx context.Context, req *sandbox.RunRequest) (*sandbox.RunResponse, error)
}

// Installer installs requirements from a wheelhouse or an index, in a
// sandbox.
type Installer struct {
	Sandbox Runner
	Backend string       // the backend's name, for messages
	Image   *image.Image // the Python installer image, resolved
	// Wheelhouse is the host directory of wheels (*.whl), mounted
	// read-only at /pack: it must be readable by the sandbox user (uid
	// 1000). Exactly one of Wheelhouse and Index is set.
	Wheelhouse string
	// Index is the package index, reached through sealed egress.
	Index   *Index
	Limits  sandbox.Limits // raised to MinTmpBytes and MinMemoryBytes
	Timeout time.Duration
	Caps    Caps // zero: DefaultCaps
	// RunID names the container ("" gives one from the time).
	RunID string
}

// Index is a package index (PEP 503 "simple" API) pip reads through the
// sealed egress proxy.
type Index struct {
	// URL is the index's URL as ParseIndexURL returned it: https, on port
	// 443, of Host.
	URL string
	// Host is the one host the egress proxy allows (port 443).
	Host string
	// CertPEM, when set, are the only certificates pip trusts for the
	// index's TLS (ReadIndexCert: --index-cert); else the installer
	// image's bundle, CABundle.
	CertPEM []byte
	// EgressSocket is the proxy's socket (sandbox.Spec.EgressSocket),
	// allowing Host:443 alone; the caller starts and stops the proxy.
	EgressSocket string
}

// CABundle is the installer image's certificate bundle: the certificates
// of Debian's ca-certificates package as shipped, concatenated in name
// order (cmd/agentnode/pyimage builds it; the host's local additions and
// /etc/ca-certificates.conf are not read, so the same package version
// gives the same bundle).
const CABundle = "/etc/ssl/certs/ca-certificates.crt"

// indexCertName is --index-cert's copy in the directory mounted at /pack.
const indexCertName = "index-ca.pem"

// MaxIndexCertBytes bounds --index-cert.
const MaxIndexCertBytes = 1 << 20

// commonPipArgs are pip's options in both modes: wheels only, no bytecode,
// no cache, no configuration files or PIP_* variables, no prompts.
var commonPipArgs = []string{
	"install", "--isolated", "--only-binary", ":all:",
	"--no-compile", "--no-cache-dir", "--disable-pip-version-check", "--no-input",
	"--no-warn-script-location", "--progress-bar", "off", "--target", targetDir,
}

// pipArgs are pip's options: from the wheelhouse only, or from the index
// only, through the egress forwarder (the proxy pip is told explicitly, not
// left to the environment), trusting the named certificates or the image's
// bundle, without retries (a refusal by the proxy is final). The
// requirements come after "--", one argument each.
func (in *Installer) pipArgs() []string {
	args := slices.Clone(commonPipArgs)
	if in.Index == nil {
		return append(args, "--no-index", "--find-links", "/pack")
	}
	cert := CABundle
	if len(in.Index.CertPEM) > 0 {
		cert = "/pack/" + indexCertName
	}
	return append(args, "--index-url", in.Index.URL, "--proxy", profile.EgressProxyURL,
		"--cert", cert, "--retries", "0", "--timeout", "30")
}

// targetDir is where pip installs inside the container.
const targetDir = "/tmp/agentnode-deps"

// script runs pip (its output to stderr), then streams the installed tree
// as a tar on stdout. Every argument is a fixed word or a checked URL
// (ParseIndexURL: no quote, space or shell metacharacter survives it).
func script(pip []string) string {
	return "set -e\n" + python.Interpreter + " -I -m pip " + strings.Join(pip, " ") + " -- \"$@\" 1>&2\n" +
		"cd " + targetDir + "\nexec tar -cf - .\n"
}

// Command is the argv the sandbox runs for reqs from a wheelhouse.
func Command(reqs []string) []string {
	return (&Installer{}).command(reqs)
}

func (in *Installer) command(reqs []string) []string {
	return append([]string{"/bin/sh", "-c", script(in.pipArgs()), "sh"}, reqs...)
}

// ParseIndexURL checks --index-url: an https URL (pip verifies the index's
// TLS end to end; the egress proxy tunnels port 443 only) whose host is a
// hostname the egress allowlist accepts (sdk/egress: no IP literal, no
// special-use name, canonical), on port 443, without user information,
// query or fragment, and with only URL-safe characters. It returns the URL
// as pip gets it (with a trailing slash) and the host.
func ParseIndexURL(s string) (string, string, error) { return ParseHTTPSURL("--index-url", s) }

// ParseHTTPSURL is ParseIndexURL for the URL a command-line flag names
// (--index-url, --npm-registry): the flag names the problems.
func ParseHTTPSURL(flag, s string) (string, string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", "", fmt.Errorf("%w: %s: %w", ErrDependencies, flag, err)
	}
	switch {
	case u.Scheme == "http":
		return "", "", fmt.Errorf("%w: %s %s: http is refused: it is reached only through the egress proxy, which tunnels TLS (https, port 443)", ErrDependencies, flag, s)
	case u.Scheme != "https":
		return "", "", fmt.Errorf("%w: %s %q: not an https URL", ErrDependencies, flag, s)
	case u.User != nil:
		return "", "", fmt.Errorf("%w: %s: user information in the URL is not accepted", ErrDependencies, flag)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", "", fmt.Errorf("%w: %s %q: a query or fragment is not accepted", ErrDependencies, flag, s)
	case u.Opaque != "":
		return "", "", fmt.Errorf("%w: %s %q: not a hierarchical URL", ErrDependencies, flag, s)
	}
	if p := u.Port(); p != "" && p != "443" {
		return "", "", fmt.Errorf("%w: %s %s: port %s: the egress proxy tunnels port 443 only", ErrDependencies, flag, s, p)
	}
	host := u.Hostname()
	if err := egress.ValidateDomains([]string{host}); err != nil {
		return "", "", fmt.Errorf("%w: %s %s: host: %w", ErrDependencies, flag, s, err)
	}
	path := u.EscapedPath()
	if !strings.HasSuffix(path, "/") {
		path += "/"
	}
	if !indexPathRE.MatchString(path) {
		return "", "", fmt.Errorf("%w: %s %q: the path may hold letters, digits and - . _ ~ / %% only", ErrDependencies, flag, s)
	}
	return "https://" + host + path, host, nil
}

var indexPathRE = regexp.MustCompile(`^/[A-Za-z0-9._~/%-]*$`)

// ReadIndexCert reads --index-cert: a PEM file of at most
// MaxIndexCertBytes holding one or more X.509 certificates and nothing
// else. It returns them PEM-encoded again (only the certificates).
func ReadIndexCert(name string) ([]byte, error) { return ReadCert("--index-cert", name) }

// ReadCert is ReadIndexCert for the file a command-line flag names
// (--index-cert, --npm-cert): the flag names the problems.
func ReadCert(flag, name string) ([]byte, error) {
	data, err := bounded.ReadFile(name, MaxIndexCertBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrDependencies, flag, err)
	}
	var out bytes.Buffer
	for n := 1; ; n++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%w: %s %s: PEM block %d is %q, not a CERTIFICATE", ErrDependencies, flag, name, n, b.Type)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return nil, fmt.Errorf("%w: %s %s: certificate %d: %w", ErrDependencies, flag, name, n, err)
		}
		if err := pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes}); err != nil {
			return nil, err
		}
	}
	if out.Len() == 0 {
		return nil, fmt.Errorf("%w: %s %s: no PEM certificate", ErrDependencies, flag, name)
	}
	if len(bytes.TrimSpace(data)) > 0 {
		return nil, fmt.Errorf("%w: %s %s: not PEM after the certificates", ErrDependencies, flag, name)
	}
	return out.Bytes(), nil
}

// Install installs reqs into <content>/python.DepsDir and returns the
// distributions installed, "name==version", sorted. content must not have
// a DepsDir of its own. Errors about the dependencies wrap ErrDependencies
// and name the requirement pip could not satisfy; a sandbox that cannot
// run or prove its cleanup is sandbox_unavailable, a run past Timeout
// timeout, one the kernel killed for memory killed_memory. What was
// written stays for the caller to remove (the store removes its staging
// directory).
func (in *Installer) Install(ctx context.Context, content string, reqs []string) ([]string, error) {
	deps := filepath.Join(content, python.DepsDir)
	if _, err := os.Lstat(deps); err == nil {
		return nil, fmt.Errorf("%w: the package has a %s of its own and %s declares dependencies: agentnode installs them there; ship one or the other",
			ErrDependencies, python.DepsDir, PyprojectFile)
	}
	packDir := in.Wheelhouse
	var egressSock string
	if in.Index != nil {
		if in.Wheelhouse != "" || in.Index.EgressSocket == "" || in.Index.URL == "" {
			return nil, fmt.Errorf("%w: an index needs the egress proxy's socket and no wheelhouse", ErrDependencies)
		}
		dir, err := in.indexDir()
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		packDir, egressSock = dir, in.Index.EgressSocket
	} else if err := in.checkWheelhouse(); err != nil {
		return nil, err
	}
	if err := os.Mkdir(deps, 0o700); err != nil {
		return nil, err
	}
	caps := in.Caps
	if caps == (Caps{}) {
		caps = DefaultCaps
	}
	limits := in.Limits
	limits.TmpBytes = max(limits.TmpBytes, MinTmpBytes)
	limits.MemoryBytes = max(limits.MemoryBytes, limits.TmpBytes+MinMemoryBytes)
	runID := in.RunID
	if runID == "" {
		runID = fmt.Sprintf("an-deps-%d", time.Now().UnixNano())
	}

	pr, pw := io.Pipe()
	extracted := make(chan error, 1)
	go func() {
		err := tarsafe.Extract(deps, pr, tarsafe.Options{
			Tree:               "the dependencies",
			MaxEntries:         caps.Entries,
			MaxFileBytes:       caps.FileBytes,
			MaxTotalBytes:      caps.TotalBytes,
			Sync:               true,
			RefuseTrailingData: true,
		})
		if err != nil {
			// The sandbox's next write fails: the backend stops it.
			pr.CloseWithError(err)
		} else {
			pr.Close()
		}
		extracted <- err
	}()
	stderr := NewTail(64 << 10)
	resp, runErr := in.Sandbox.Run(ctx, &sandbox.RunRequest{
		Spec: sandbox.Spec{
			RunID:        runID,
			Image:        in.Image.Ref,
			ImageStore:   in.Image.Store,
			PackageDir:   packDir,
			Args:         in.command(reqs),
			Env:          []string{"TMPDIR=/tmp", "LC_ALL=C.UTF-8"},
			Limits:       limits,
			Timeout:      in.Timeout,
			Network:      false, // an index is reached through EgressSocket only
			EgressSocket: egressSock,
		},
		Stdout: pw,
		Stderr: stderr,
	})
	pw.Close()
	extractErr := <-extracted

	if err := RunFailure(resp, runErr, extractErr, ErrDependencies, in.Backend, "the dependencies", in.Timeout, limits.MemoryBytes); err != nil {
		return nil, err
	}
	if resp.ExitCode != 0 {
		return nil, in.pipError(reqs, stderr.String(), resp.ExitCode)
	}
	installed, err := distributions(deps)
	if err != nil {
		return nil, err
	}
	if len(installed) == 0 {
		return nil, fmt.Errorf("%w: pip installed nothing for %s", ErrDependencies, strings.Join(reqs, ", "))
	}
	return installed, nil
}

// indexDir is the directory mounted at /pack for an install from the
// index: empty, or --index-cert's certificates alone; readable by the
// sandbox user.
func (in *Installer) indexDir() (string, error) {
	dir, err := os.MkdirTemp("", "agentnode-index-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if len(in.Index.CertPEM) > 0 {
		if err := os.WriteFile(filepath.Join(dir, indexCertName), in.Index.CertPEM, 0o644); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// checkWheelhouse: a directory, given.
func (in *Installer) checkWheelhouse() error {
	if in.Wheelhouse == "" {
		return fmt.Errorf("%w: no wheelhouse: give one with --wheelhouse DIR", ErrDependencies)
	}
	fi, err := os.Stat(in.Wheelhouse)
	if err != nil {
		return fmt.Errorf("%w: wheelhouse: %w", ErrDependencies, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: wheelhouse %s is not a directory", ErrDependencies, in.Wheelhouse)
	}
	return nil
}

var (
	noMatchRE = regexp.MustCompile(`(?m)^ERROR: No matching distribution found for (.+)$`)
	// warningRE: what pip says about pages it could not fetch (at its
	// info level: a TLS or proxy failure on an index page).
	warningRE  = regexp.MustCompile(`(?m)^(?:WARNING: .*|Could not fetch URL .*)$`)
	errorRE    = regexp.MustCompile(`(?m)^ERROR: .*$`)
	sdistRE    = regexp.MustCompile(`^(.+?)-[0-9][^-]*\.(tar\.gz|zip|tar\.bz2|tar\.xz|tgz)$`)
	distInfoRE = regexp.MustCompile(`^(.+)-([^-]+)\.dist-info$`)
)

// pipError says why pip failed: the requirement no wheel satisfies (and
// whether only an sdist of it is in the wheelhouse), else pip's ERROR
// lines.
func (in *Installer) pipError(reqs []string, stderr string, code int) error {
	if m := noMatchRE.FindStringSubmatch(stderr); m != nil && in.Index != nil {
		req := strings.TrimSpace(m[1])
		msg := fmt.Sprintf("no wheel on the index %s satisfies the requirement %q", in.Index.URL, req)
		if from := fromOf(stderr, req); from != "" {
			msg += " (required by " + from + ")"
		}
		if w := warningRE.FindAllString(stderr, 4); len(w) > 0 {
			msg += "; pip: " + strings.Join(w, "; ")
		}
		return fmt.Errorf("%w: %s; nothing was installed", ErrDependencies, msg)
	}
	if m := noMatchRE.FindStringSubmatch(stderr); m != nil {
		req := strings.TrimSpace(m[1])
		msg := fmt.Sprintf("no wheel in the wheelhouse %s satisfies the requirement %q", in.Wheelhouse, req)
		if sd := in.sdists(normalize(requirementName(req))); len(sd) > 0 {
			msg += fmt.Sprintf("; the wheelhouse has only a source distribution of it (%s), and agentnode installs wheels only: building one would run the package's code",
				strings.Join(sd, ", "))
		}
		if from := fromOf(stderr, req); from != "" {
			msg += " (required by " + from + ")"
		}
		return fmt.Errorf("%w: %s; nothing was installed", ErrDependencies, msg)
	}
	lines := errorRE.FindAllString(stderr, 8)
	detail := strings.Join(lines, "; ")
	if detail == "" {
		detail = lastLines(stderr, 5)
	}
	return fmt.Errorf("%w: pip could not install %s (exit %d): %s; nothing was installed", ErrDependencies, strings.Join(reqs, ", "), code, detail)
}

// fromOf returns what pip says required req ("from liba==2.1"), if it said.
func fromOf(stderr, req string) string {
	re := regexp.MustCompile(`(?m)^ERROR: Could not find a version that satisfies the requirement ` + regexp.QuoteMeta(req) + ` \(from ([^)]*)\)`)
	if m := re.FindStringSubmatch(stderr); m != nil && !strings.HasPrefix(m[1], "versions:") {
		return m[1]
	}
	return ""
}

// sdists lists the source distributions of name in the wheelhouse.
func (in *Installer) sdists(name string) []string {
	ents, err := os.ReadDir(in.Wheelhouse)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if m := sdistRE.FindStringSubmatch(e.Name()); m != nil && normalize(m[1]) == name {
			out = append(out, e.Name())
		}
	}
	return out
}

// distributions lists the *.dist-info directories pip wrote, as
// "name==version".
func distributions(deps string) ([]string, error) {
	ents, err := os.ReadDir(deps)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if m := distInfoRE.FindStringSubmatch(e.Name()); m != nil && e.IsDir() {
			out = append(out, m[1]+"=="+m[2])
		}
	}
	slices.Sort(out)
	return out, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

// tail keeps the last max bytes written.
// RunFailure is the refusal of a sandboxed install of what ("the
// dependencies", "the npm tree") whose run did not come to a plain exit,
// nil when it did (the caller then reads the exit code): no result or a
// backend error, sandbox_unavailable; a cleanup the backend could not
// prove, sandbox_unavailable; past timeout, timeout; installed files the
// extraction refused, an error wrapping refused; killed for memory,
// killed_memory.
func RunFailure(resp *sandbox.RunResponse, runErr, extractErr, refused error, backend, what string, timeout time.Duration, memoryBytes int64) error {
	switch {
	case resp == nil:
		if runErr == nil {
			runErr = errors.New("no result")
		}
		return reason.New(reason.SandboxUnavailable, "installing %s in sandbox backend %s: %w", what, backend, runErr)
	case !resp.CleanupVerified:
		return reason.New(reason.SandboxUnavailable, "sandbox backend %s could not prove the container that installed %s was removed", backend, what)
	case resp.TimedOut:
		return reason.New(reason.Timeout, "installing %s timed out after %s (sandbox.limits.timeout_seconds)", what, timeout)
	case extractErr != nil:
		return fmt.Errorf("%w: the installed files were refused: %w; nothing was installed", refused, extractErr)
	case resp.OOMKilled && resp.ExitCode != 0:
		return reason.New(reason.KilledMemory, "installing %s was killed by the kernel for using more than %d MiB", what, memoryBytes>>20)
	case runErr != nil:
		return reason.New(reason.SandboxUnavailable, "installing %s in sandbox backend %s: %w", what, backend, runErr)
	}
	return nil
}

// Tail keeps the last max bytes written to it (a sandboxed installer's
// stderr, whose errors come last).
type Tail struct {
	buf bytes.Buffer
	max int
}

// NewTail returns a Tail keeping max bytes.
func NewTail(max int) *Tail { return &Tail{max: max} }

func (t *Tail) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *Tail) String() string { return t.buf.String() }
