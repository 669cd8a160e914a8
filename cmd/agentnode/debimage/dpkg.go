package debimage

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// ErrChecksum is a file whose content does not match the checksum dpkg
// recorded for it, or that has none: the build refuses it.
var ErrChecksum = errors.New("file does not match its package's checksum")

// ErrPackage is a package the build cannot take from the dpkg database: not
// installed, a dependency nothing installed satisfies, or a file list that
// does not match the files on disk.
var ErrPackage = errors.New("package cannot be taken from the dpkg database")

// skipPrefixes are documentation paths left out of the image (the
// interpreter reads none of them, and hosts often exclude them from
// installation with dpkg's path-exclude, which would make the image depend
// on the host's dpkg configuration).
var skipPrefixes = []string{"/usr/share/doc", "/usr/share/man", "/usr/share/info", "/usr/share/lintian"}

// mergedUsr are the top-level directories that merged-/usr systems (Debian
// 12 and later) make symlinks into /usr. A package file listed under one of
// them goes into the image under /usr; the image gets the symlink (except
// for /bin, which is the base image's busybox directory).
var mergedUsr = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// dpkgPackage is one stanza of dpkg's status file, the fields the build
// reads.
type dpkgPackage struct {
	name, arch, version  string
	installed, essential bool
	depends              string // Pre-Depends and Depends
	provides             []string
	conffiles            map[string]string // path → md5, obsolete ones left out
}

// dpkgDB is dpkg's status file, indexed.
type dpkgDB struct {
	admin    string
	arch     string
	byName   map[string]*dpkgPackage
	provides map[string][]*dpkgPackage
}

// readStatus parses admin/status (deb822 stanzas) and keeps the installed
// packages of arch (or "all").
func readStatus(admin, arch string) (*dpkgDB, error) {
	data, err := os.ReadFile(filepath.Join(admin, "status"))
	if err != nil {
		return nil, fmt.Errorf("dpkg database: %w", err)
	}
	db := &dpkgDB{admin: admin, arch: arch, byName: map[string]*dpkgPackage{}, provides: map[string][]*dpkgPackage{}}
	for _, stanza := range bytes.Split(data, []byte("\n\n")) {
		fields := map[string]string{}
		last := ""
		for _, line := range strings.Split(string(stanza), "\n") {
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
		p := &dpkgPackage{
			name:      fields["Package"],
			arch:      fields["Architecture"],
			version:   fields["Version"],
			installed: strings.HasSuffix(fields["Status"], " installed"),
			essential: fields["Essential"] == "yes",
			depends:   strings.Trim(fields["Pre-Depends"]+", "+fields["Depends"], ", "),
			conffiles: map[string]string{},
		}
		if p.name == "" || !p.installed || (p.arch != arch && p.arch != "all") {
			continue
		}
		for _, line := range strings.Split(fields["Conffiles"], "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && !strings.Contains(line, " obsolete") {
				p.conffiles[f[0]] = f[1]
			}
		}
		db.byName[p.name] = p
		for _, prov := range splitList(fields["Provides"]) {
			name := relationName(prov)
			db.provides[name] = append(db.provides[name], p)
		}
	}
	return db, nil
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// relationName is the package name of one alternative of a relation:
// "libc6 (>= 2.34)" → libc6, "python3:any" → python3.
func relationName(rel string) string {
	name := strings.Fields(rel)[0]
	if i := strings.IndexAny(name, "(["); i >= 0 {
		name = name[:i]
	}
	name, _, _ = strings.Cut(name, ":")
	return name
}

// resolve is the installed package that satisfies one relation
// ("a (>= 1) | b"): the first alternative installed by name, else the first
// one an installed package provides.
func (db *dpkgDB) resolve(rel string) (*dpkgPackage, error) {
	alts := strings.Split(rel, "|")
	for _, a := range alts {
		if p := db.byName[relationName(strings.TrimSpace(a))]; p != nil {
			return p, nil
		}
	}
	for _, a := range alts {
		if ps := db.provides[relationName(strings.TrimSpace(a))]; len(ps) > 0 {
			return ps[0], nil
		}
	}
	return nil, fmt.Errorf("%w: nothing installed satisfies %q", ErrPackage, rel)
}

// closure is the roots and what they depend on (Pre-Depends, Depends),
// sorted by name. Essential packages are not followed: dpkg and the
// tools every Debian system has are never loaded by the interpreter (they
// are reached only through packaging relations, e.g. readline-common →
// dpkg). It returns them as skipped.
func (db *dpkgDB) closure(roots []string) (pkgs []*dpkgPackage, skipped []string, err error) {
	seen := map[string]bool{}
	var todo []*dpkgPackage
	for _, r := range roots {
		p, err := db.resolve(r)
		if err != nil {
			return nil, nil, fmt.Errorf("root package: %w", err)
		}
		todo = append(todo, p)
	}
	for len(todo) > 0 {
		p := todo[0]
		todo = todo[1:]
		if seen[p.name] {
			continue
		}
		seen[p.name] = true
		if p.essential {
			skipped = append(skipped, p.name)
			continue
		}
		pkgs = append(pkgs, p)
		for _, rel := range splitList(p.depends) {
			dep, err := db.resolve(rel)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", p.name, err)
			}
			todo = append(todo, dep)
		}
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].name < pkgs[j].name })
	sort.Strings(skipped)
	return pkgs, skipped, nil
}

// infoFile is admin/info/<name>:<arch>.<ext> (Multi-Arch: same packages)
// or admin/info/<name>.<ext>.
func (db *dpkgDB) infoFile(p *dpkgPackage, ext string) (string, error) {
	for _, n := range []string{p.name + ":" + p.arch + "." + ext, p.name + "." + ext} {
		f := filepath.Join(db.admin, "info", n)
		if _, err := os.Stat(f); err == nil {
			return f, nil
		}
	}
	return "", fmt.Errorf("%w: %s has no %s file in %s", ErrPackage, p.name, ext, filepath.Join(db.admin, "info"))
}

// fileList is the package's paths (admin/info/<pkg>.list) without the
// documentation ones, each absolute and clean.
func (db *dpkgDB) fileList(p *dpkgPackage) ([]string, error) {
	f, err := db.infoFile(p, "list")
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || line == "/." {
			continue
		}
		if !path.IsAbs(line) || path.Clean(line) != line || strings.ContainsRune(line, 0) {
			return nil, fmt.Errorf("%w: %s lists %q", ErrPackage, p.name, line)
		}
		if skipped(line) {
			continue
		}
		out = append(out, line)
	}
	return out, nil
}

func skipped(p string) bool {
	for _, s := range skipPrefixes {
		if p == s || strings.HasPrefix(p, s+"/") {
			return true
		}
	}
	return false
}

// md5sums is admin/info/<pkg>.md5sums: path (absolute) → md5, plus the
// package's conffiles (their checksums are in the status file).
func (db *dpkgDB) md5sums(p *dpkgPackage) (map[string]string, error) {
	sums := map[string]string{}
	for k, v := range p.conffiles {
		sums[k] = v
	}
	f, err := db.infoFile(p, "md5sums")
	if err != nil {
		// A package without regular files (only directories and
		// symlinks) has no md5sums file; a file it lists then has no
		// checksum and is refused.
		return sums, nil
	}
	data, err := os.ReadFile(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 32 {
			return nil, fmt.Errorf("%w: %s: malformed md5sums line %q", ErrPackage, p.name, sc.Text())
		}
		sums["/"+name] = sum
	}
	return sums, sc.Err()
}

// canonical is p in the merged-/usr layout (/lib/x → /usr/lib/x), and the
// top-level directory it was moved from ("" if none).
func canonical(p string) (string, string) {
	top, rest, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	for _, m := range mergedUsr {
		if top == m {
			if rest == "" {
				return "/usr/" + m, m
			}
			return "/usr/" + m + "/" + rest, m
		}
	}
	return p, ""
}

// readVerified reads the regular file at host path hostPath and checks it
// against want (md5 hex; "" means dpkg has no checksum for it).
func readVerified(hostPath, want string) ([]byte, error) {
	if want == "" {
		return nil, fmt.Errorf("%w: %s has no checksum in the dpkg database", ErrChecksum, hostPath)
	}
	data, err := os.ReadFile(hostPath)
	if err != nil {
		return nil, err
	}
	sum := md5.Sum(data)
	if got := hex.EncodeToString(sum[:]); got != want {
		return nil, fmt.Errorf("%w: %s has md5 %s, its package says %s (modified or corrupted; reinstall the package)",
			ErrChecksum, hostPath, got, want)
	}
	return data, nil
}

// isNotExist reports a missing file.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
