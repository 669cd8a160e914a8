package debimage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ErrArchive is a package apt cannot give: no archive in apt's lists offers
// it (run apt-get update), the download failed, or a downloaded file does
// not match the SHA256 of apt's index.
var ErrArchive = errors.New("package cannot be taken from the Debian archive")

// Deb is one package file Fetch resolved and downloaded.
type Deb struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Arch    string `json:"arch"`
	SHA256  string `json:"sha256"` // from apt's index, checked against the file
	Path    string `json:"-"`
}

// Fetch resolves the dependency closure of roots in apt's package lists and
// downloads each package's .deb into dir with `apt-get download`. Only
// Debian's archive counts: for each package the version is the newest one
// a Packages index whose release says o=Debian offers (`apt-cache policy`),
// never one only installed on this host or offered by another vendor's
// repository (e.g. NodeSource's nodejs); a relation's alternative is the
// first one Debian offers by name; an Essential package reached is taken
// (so that Collect finds it installed and skips it: npm's python3-minimal
// pre-depends on dpkg) but not followed. Every file, downloaded now or found in dir from an
// earlier Fetch, must match the SHA256 apt's index gives for it. The result
// is sorted by name.
func Fetch(ctx context.Context, dir string, roots []string, arch string) ([]Deb, error) {
	if arch == "" {
		arch = runtime.GOARCH
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	r, err := newResolver(ctx)
	if err != nil {
		return nil, err
	}
	chosen := map[string]*Deb{}
	queue := append([]string(nil), roots...)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if chosen[name] != nil {
			continue
		}
		if err := r.prefetch(append([]string{name}, queue...)); err != nil {
			return nil, err
		}
		version, err := r.version(name)
		if err != nil {
			return nil, err
		}
		if version == "" {
			return nil, fmt.Errorf("%w: no Debian archive in apt's lists offers %s (run apt-get update)", ErrArchive, name)
		}
		fields, err := r.show(name, version, queue)
		if err != nil {
			return nil, err
		}
		d := &Deb{Name: name, Version: version, Arch: fields["Architecture"], SHA256: fields["SHA256"]}
		if len(d.SHA256) != 64 {
			return nil, fmt.Errorf("%w: apt's index has no SHA256 for %s=%s", ErrArchive, name, version)
		}
		chosen[name] = d
		if fields["Essential"] == "yes" && !contains(roots, name) {
			// Taken (Collect finds it installed and skips it, as it skips
			// Essential packages), not followed.
			continue
		}
		rels := splitList(strings.Trim(fields["Pre-Depends"]+", "+fields["Depends"], ", "))
		var alts []string
		for _, rel := range rels {
			for _, a := range strings.Split(rel, "|") {
				alts = append(alts, relationName(strings.TrimSpace(a)))
			}
		}
		if err := r.prefetch(alts); err != nil {
			return nil, err
		}
		for _, rel := range rels {
			alt, err := r.firstOffered(rel)
			if err != nil {
				return nil, err
			}
			queue = append(queue, alt)
		}
	}
	var out []Deb
	var missing []string
	for _, d := range chosen {
		d.Path = filepath.Join(dir, debFileName(d))
		if fileSHA256(d.Path) != d.SHA256 {
			missing = append(missing, d.Name+"="+d.Version)
		}
	}
	sort.Strings(missing)
	for len(missing) > 0 {
		// One apt-get for many files; download checks each below (and
		// fetches one alone again if it is still wrong).
		n := min(len(missing), batch)
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"download", "-q"}, missing[:n]...)...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, io.Discard, io.Discard
		_ = cmd.Run()
		missing = missing[n:]
	}
	for _, d := range chosen {
		if err := download(ctx, dir, d); err != nil {
			return nil, err
		}
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// aptCache runs apt-cache with args and returns its output.
func aptCache(ctx context.Context, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, "apt-cache", args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: apt-cache %s: %w: %s", ErrArchive, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// resolver picks package versions from Debian's archive in apt's lists.
type resolver struct {
	ctx context.Context
	// debian are the package files (as `apt-cache policy` names them:
	// "URL SUITE/COMPONENT ARCH Packages") whose release is o=Debian.
	debian map[string]bool
	// versions memoizes version (a relation names the same packages
	// again and again: npm's closure asks thousands of times).
	versions map[string]string
	shows    map[string]map[string]string // by "name=version", from show
}

// newResolver reads which of apt's package files are Debian's.
func newResolver(ctx context.Context) (*resolver, error) {
	out, err := aptCache(ctx, "policy")
	if err != nil {
		return nil, err
	}
	return &resolver{ctx: ctx, debian: debianFiles(out), versions: map[string]string{}, shows: map[string]map[string]string{}}, nil
}

// debianFiles are the package files of `apt-cache policy` output whose
// release is o=Debian.
func debianFiles(out string) map[string]bool {
	debian := map[string]bool{}
	file := ""
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[len(f)-1] == "Packages" && isPriority(f[0]):
			file = strings.Join(f[1:], " ")
		case len(f) >= 2 && f[0] == "release" && file != "":
			// "release v=12,o=Debian,a=…" (values may hold spaces)
			rel := strings.TrimPrefix(strings.TrimSpace(line), "release ")
			if slices.Contains(strings.Split(rel, ","), "o=Debian") {
				debian[file] = true
			}
		}
	}
	return debian
}

func isPriority(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

// version is the newest version of name one of Debian's package files
// offers ("" when none does): the first such entry of `apt-cache policy
// NAME`'s version table, which lists versions newest first.
func (r *resolver) version(name string) (string, error) {
	if v, ok := r.versions[name]; ok {
		return v, nil
	}
	out, err := aptCache(r.ctx, "policy", name)
	if err != nil {
		return "", err
	}
	v := newestFrom(out, r.debian)
	r.versions[name] = v
	return v, nil
}

// newestFrom is the first version of the version table of `apt-cache
// policy NAME` output that one of files offers ("" when none does).
func newestFrom(out string, files map[string]bool) string {
	version := ""
	inTable := false
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "Version table:" {
			inTable = true
			continue
		}
		if !inTable {
			continue
		}
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "        ") && len(f) >= 2 && isPriority(f[0]):
			if version != "" && files[strings.Join(f[1:], " ")] {
				return version
			}
		case strings.HasPrefix(line, " *** ") && len(f) == 3:
			version = f[1]
		case strings.HasPrefix(line, "     ") && len(f) == 2:
			version = f[0]
		case len(f) > 0 && !strings.HasPrefix(line, " "):
			inTable = false // the next package
		}
	}
	return ""
}

// batch is how many packages one apt-cache or apt-get call is given.
const batch = 200

// prefetch looks up, in batched `apt-cache policy` calls, the versions of
// names not yet memoized (version asks alone for one the output does not
// name).
func (r *resolver) prefetch(names []string) error {
	var todo []string
	seen := map[string]bool{}
	for _, n := range names {
		if _, ok := r.versions[n]; !ok && !seen[n] && n != "" {
			seen[n] = true
			todo = append(todo, n)
		}
	}
	for len(todo) > 0 {
		n := min(len(todo), batch)
		out, err := aptCache(r.ctx, append([]string{"policy"}, todo[:n]...)...)
		if err != nil {
			return err
		}
		for name, section := range policySections(out) {
			if seen[name] {
				r.versions[name] = newestFrom(section, r.debian)
			}
		}
		todo = todo[n:]
	}
	return nil
}

// policySections splits `apt-cache policy A B …` output into each
// package's section, by the "NAME:" lines that start them.
func policySections(out string) map[string]string {
	sections := map[string]string{}
	name := ""
	var b strings.Builder
	flush := func() {
		if name != "" {
			sections[name] = b.String()
		}
		b.Reset()
	}
	for _, line := range strings.Split(out, "\n") {
		if line != "" && line[0] != ' ' && strings.HasSuffix(line, ":") {
			flush()
			name = strings.TrimSuffix(line, ":")
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	flush()
	return sections
}

// show is aptShow of name=version, looked up together with the queued
// packages whose versions are known (one batched `apt-cache show`).
func (r *resolver) show(name, version string, queue []string) (map[string]string, error) {
	key := name + "=" + version
	if f, ok := r.shows[key]; ok {
		return f, nil
	}
	want := []string{key}
	for _, q := range queue {
		if v := r.versions[q]; v != "" && len(want) < batch {
			if _, ok := r.shows[q+"="+v]; !ok && !slices.Contains(want, q+"="+v) {
				want = append(want, q+"="+v)
			}
		}
	}
	out, err := aptCache(r.ctx, append([]string{"show", "--no-all-versions"}, want...)...)
	if err != nil {
		return aptShow(r.ctx, name, version)
	}
	for _, stanza := range strings.Split(out, "\n\n") {
		f := parseStanza(stanza)
		if k := f["Package"] + "=" + f["Version"]; slices.Contains(want, k) {
			if _, ok := r.shows[k]; !ok {
				r.shows[k] = f
			}
		}
	}
	if f, ok := r.shows[key]; ok {
		return f, nil
	}
	return aptShow(r.ctx, name, version)
}

// firstOffered is the first alternative of a relation ("a (>= 1) | b")
// that Debian's archive offers by name.
func (r *resolver) firstOffered(rel string) (string, error) {
	for _, a := range strings.Split(rel, "|") {
		name := relationName(strings.TrimSpace(a))
		v, err := r.version(name)
		if err != nil {
			return "", err
		}
		if v != "" {
			return name, nil
		}
	}
	// No alternative is a real package Debian offers: the first virtual
	// one with exactly one provider Debian offers (npm's node-cli-table3,
	// provided by node-cli-table) is that provider.
	for _, a := range strings.Split(rel, "|") {
		out, err := aptCache(r.ctx, "showpkg", relationName(strings.TrimSpace(a)))
		if err != nil {
			return "", err
		}
		var offered []string
		for _, p := range providers(out) {
			v, err := r.version(p)
			if err != nil {
				return "", err
			}
			if v != "" && !slices.Contains(offered, p) {
				offered = append(offered, p)
			}
		}
		if len(offered) == 1 {
			return offered[0], nil
		}
	}
	return "", fmt.Errorf("%w: Debian's archive offers no package named in %q, nor a single provider of it", ErrArchive, rel)
}

// providers are the package names of the "Reverse Provides:" section of
// `apt-cache showpkg NAME` output ("PKG VERSION (= V)" lines).
func providers(out string) []string {
	_, section, ok := strings.Cut(out, "Reverse Provides:")
	if !ok {
		return nil
	}
	var names []string
	for _, line := range strings.Split(section, "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			names = append(names, f[0])
		}
	}
	return names
}

// aptShow is the fields of name=version in apt's lists.
func aptShow(ctx context.Context, name, version string) (map[string]string, error) {
	out, err := aptCache(ctx, "show", "--no-all-versions", name+"="+version)
	if err != nil {
		return nil, err
	}
	stanza, _, _ := strings.Cut(out, "\n\n")
	return parseStanza(stanza), nil
}

// parseStanza parses one deb822 stanza; continuation lines are joined with
// newlines.
func parseStanza(stanza string) map[string]string {
	fields := map[string]string{}
	last := ""
	for _, line := range strings.Split(stanza, "\n") {
		if line == "" {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if last != "" {
				fields[last] += "\n" + strings.TrimSpace(line)
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		last = k
		fields[k] = strings.TrimSpace(v)
	}
	return fields
}

// debFileName is the name apt-get download gives the file: the epoch's
// colon escaped.
func debFileName(d *Deb) string {
	return d.Name + "_" + strings.ReplaceAll(d.Version, ":", "%3a") + "_" + d.Arch + ".deb"
}

// download fetches d into dir unless a file there already has its SHA256,
// and checks the file.
func download(ctx context.Context, dir string, d *Deb) error {
	if fileSHA256(d.Path) == d.SHA256 {
		return nil
	}
	_ = os.Remove(d.Path)
	var errb bytes.Buffer
	cmd := exec.CommandContext(ctx, "apt-get", "download", "-q", d.Name+"="+d.Version)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, io.Discard, &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: apt-get download %s=%s: %w: %s", ErrArchive, d.Name, d.Version, err, strings.TrimSpace(errb.String()))
	}
	if got := fileSHA256(d.Path); got != d.SHA256 {
		return fmt.Errorf("%w: %s has sha256 %q, apt's index says %s", ErrArchive, d.Path, got, d.SHA256)
	}
	return nil
}

func fileSHA256(p string) string {
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Unpack installs debs into root the way Collect reads an installed
// system, without running anything of theirs: each package's files
// extracted with `dpkg-deb -x`, and a dpkg database at root/var/lib/dpkg
// written from the packages' control data — the status file (each package
// "install ok installed", its relations, and its conffiles with the md5 of
// the extracted file), info/<pkg>.list (the data archive's paths) and
// info/<pkg>.md5sums (the package's own). No maintainer script runs.
func Unpack(ctx context.Context, debs []Deb, root string) error {
	admin := filepath.Join(root, "var", "lib", "dpkg")
	if err := os.MkdirAll(filepath.Join(admin, "info"), 0o755); err != nil {
		return err
	}
	var status bytes.Buffer
	for _, d := range debs {
		var errb bytes.Buffer
		cmd := exec.CommandContext(ctx, "dpkg-deb", "-x", d.Path, root)
		cmd.Stderr = &errb
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%w: dpkg-deb -x %s: %w: %s", ErrPackage, d.Path, err, strings.TrimSpace(errb.String()))
		}
		control, err := debMembers(ctx, d.Path, "--ctrl-tarfile", "./control", "./md5sums", "./conffiles")
		if err != nil {
			return err
		}
		fields := parseStanza(string(control["./control"]))
		if fields["Package"] != d.Name || fields["Version"] != d.Version {
			return fmt.Errorf("%w: %s is %s %s, not %s %s", ErrPackage, d.Path, fields["Package"], fields["Version"], d.Name, d.Version)
		}
		list, err := debList(ctx, d.Path)
		if err != nil {
			return err
		}
		info := filepath.Join(admin, "info", d.Name)
		if err := os.WriteFile(info+".list", []byte(strings.Join(list, "\n")+"\n"), 0o644); err != nil {
			return err
		}
		if sums, ok := control["./md5sums"]; ok {
			if err := os.WriteFile(info+".md5sums", sums, 0o644); err != nil {
				return err
			}
		}
		fmt.Fprintf(&status, "Package: %s\nStatus: install ok installed\n", d.Name)
		for _, k := range []string{"Essential", "Architecture", "Multi-Arch", "Version", "Provides", "Pre-Depends", "Depends"} {
			if v := fields[k]; v != "" {
				fmt.Fprintf(&status, "%s: %s\n", k, strings.ReplaceAll(v, "\n", "\n "))
			}
		}
		if conf := strings.Fields(string(control["./conffiles"])); len(conf) > 0 {
			status.WriteString("Conffiles:\n")
			for _, c := range conf {
				if !path.IsAbs(c) {
					continue // "remove-on-upgrade" and other flags
				}
				data, err := os.ReadFile(filepath.Join(root, c))
				if err != nil {
					return fmt.Errorf("%w: %s: conffile %s: %w", ErrPackage, d.Name, c, err)
				}
				sum := md5.Sum(data)
				fmt.Fprintf(&status, " %s %s\n", c, hex.EncodeToString(sum[:]))
			}
		}
		status.WriteString("\n")
	}
	return os.WriteFile(filepath.Join(admin, "status"), status.Bytes(), 0o644)
}

// debMembers reads the named regular files of the tar archive dpkg-deb
// gives with flag (--ctrl-tarfile, --fsys-tarfile).
func debMembers(ctx context.Context, deb, flag string, names ...string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := debTar(ctx, deb, flag, func(h *tar.Header, r io.Reader) error {
		if h.Typeflag == tar.TypeReg && contains(names, h.Name) {
			data, err := io.ReadAll(io.LimitReader(r, 16<<20))
			if err != nil {
				return err
			}
			out[h.Name] = data
		}
		return nil
	})
	return out, err
}

// debList is the data archive's paths as dpkg lists them: "/." for the
// top, then each path absolute without a trailing slash.
func debList(ctx context.Context, deb string) ([]string, error) {
	var list []string
	err := debTar(ctx, deb, "--fsys-tarfile", func(h *tar.Header, _ io.Reader) error {
		p := path.Clean("/" + h.Name)
		if p == "/" {
			p = "/."
		}
		list = append(list, p)
		return nil
	})
	return list, err
}

// debTar runs dpkg-deb flag deb and calls fn for each entry of the tar
// archive it writes.
func debTar(ctx context.Context, deb, flag string, fn func(*tar.Header, io.Reader) error) error {
	var errb bytes.Buffer
	cmd := exec.CommandContext(ctx, "dpkg-deb", flag, deb)
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: dpkg-deb: %w", ErrPackage, err)
	}
	tr := tar.NewReader(bufio.NewReader(stdout))
	var walkErr error
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			walkErr = err
			break
		}
		if walkErr = fn(h, tr); walkErr != nil {
			break
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%w: dpkg-deb %s %s: %w: %s", ErrPackage, flag, deb, err, strings.TrimSpace(errb.String()))
	}
	if walkErr != nil {
		return fmt.Errorf("%w: %s: %w", ErrPackage, deb, walkErr)
	}
	return nil
}
