// Package store is the installed package store, home.PackagesDir(home)
// (specs/store.md).
//
// Each package lives in <root>/<package_id>/: content/ is the package tree
// exactly as installed, read-only (files 0444 or 0555, directories 0555),
// and meta.json records the version, the content hash, the install time and
// the attestations supplied at install. The content hash covers exactly
// content/, so Verify can recompute it before every run.
//
// Install is all or nothing: the tree (copied from a directory, or
// unpacked from a .tar.gz with every entry checked, archive.go) is put into
// a staging directory inside root, its manifest checked and its content
// hashed there, and renamed into place; a replaced install is renamed aside
// first and removed afterwards. Any error leaves the store as it was, and
// recover removes what a crash left. Size caps (Limits) apply to both
// sources. Mutations hold an exclusive lock on <root>/.lock.
package store

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/filelock"
	"github.com/agentnode/agentnode/kernel/hashcache"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/verdict"
	"github.com/agentnode/agentnode/sdk/atomicfile"
	"github.com/agentnode/agentnode/sdk/python"
)

// ErrNotInstalled is wrapped by the error of Get and Remove for a package
// that is not in the store: `package "x" is not installed`.
var ErrNotInstalled = errors.New("not installed")

// Names inside root and inside a package directory.
const (
	metaFile      = "meta.json"
	contentDir    = "content"
	lockFile      = ".lock"
	stagingPrefix = ".staging-"
	oldPrefix     = ".old-"
	removedPrefix = ".removed-"
)

// Store is the package store rooted at a directory. The zero value is not
// usable; call Open.
type Store struct {
	root   string
	now    func() time.Time
	limits Limits
	// afterFill, if set, runs after the package tree is in the staging
	// directory; tests use it to inject failures.
	afterFill func(staging string) error
	// verdicts spares loading a manifest validated before from validating
	// it again (WithVerdicts).
	verdicts *verdict.Cache
	// hashes spares Verify from reading files that provably did not change
	// since they were last hashed (WithHashes).
	hashes *hashcache.Cache
}

// Package is an installed package.
type Package struct {
	ID           string
	Version      string
	Dir          string // the root of the installed tree (<root>/<id>/content)
	Manifest     *manifest.Manifest
	ArtifactHash string // "sha256:<hex>", ContentHash of Dir at install
	InstalledAt  time.Time
	// Source is how it was installed: SourceDirectory or SourceArchive
	// ("" for installs made before it was recorded).
	Source string
	// ArchiveSHA256 is the hex SHA-256 of the archive file it was
	// installed from; "" for a directory.
	ArchiveSHA256 string
	Attestations  [][]byte // as supplied at install, each a JSON document in compact form
	// DepsHash is "sha256:<hex>", ContentHash of Dir's dependencies
	// directory (DepsDir) at install, when dependencies were installed
	// into it (InstallOptions.Deps); then ArtifactHash is the content
	// hash of Dir without that directory. "" when none were.
	DepsHash string
	// Dependencies are the distributions installed there, "name==version".
	Dependencies []string
}

// DepsDir is the directory of a package's installed dependencies, inside
// its tree (python.DepsDir: where the Python shim looks for them).
const DepsDir = python.DepsDir

// meta is meta.json.
type meta struct {
	PackageID     string            `json:"package_id"`
	Version       string            `json:"version"`
	ArtifactHash  string            `json:"artifact_hash"`
	InstalledAt   time.Time         `json:"installed_at"`
	Source        string            `json:"source,omitempty"`
	ArchiveSHA256 string            `json:"archive_sha256,omitempty"`
	DepsHash      string            `json:"deps_hash,omitempty"`
	Dependencies  []string          `json:"dependencies,omitempty"`
	Attestations  []json.RawMessage `json:"attestations"`
}

// Open returns the store rooted at root. Nothing is created until the
// first Install.
func Open(root string) *Store {
	return &Store{root: root, now: time.Now, limits: DefaultLimits}
}

// WithVerdicts makes the store remember which manifests it validated in c,
// and skip their schema validation when it loads them again
// (manifest.LoadCached). It returns s.
func (s *Store) WithVerdicts(c *verdict.Cache) *Store {
	s.verdicts = c
	return s
}

// HashCacheFile is the name, in agentnode's state directory, of the cache
// of installed files' digests (WithHashes).
const HashCacheFile = "package-hashes.json"

// WithHashes makes Verify take the digest of a file that did not change
// since it was last hashed from c (kernel/hashcache) instead of reading it
// again. It returns s.
func (s *Store) WithHashes(c *hashcache.Cache) *Store {
	s.hashes = c
	return s
}

// Root is the store's directory.
func (s *Store) Root() string { return s.root }

func (s *Store) pkgDir(id string) string { return filepath.Join(s.root, id) }

func checkID(id string) error {
	if !manifest.ValidPackageID(id) {
		return fmt.Errorf("invalid package id %q (want 3 to 60 characters of a-z, 0-9 and -)", id)
	}
	return nil
}

func notInstalled(id string) error {
	return fmt.Errorf("package %q is %w", id, ErrNotInstalled)
}

// InstallOptions are the optional parts of an install.
type InstallOptions struct {
	// Attestations are kept with the package; each must be a JSON document
	// (their signatures are checked at run time, not here).
	Attestations [][]byte
	// SHA256, if set, pins the source (64 hex digits, optionally
	// "sha256:"): for an archive the SHA-256 of the archive file, checked
	// before anything is unpacked; for a directory its content hash (the
	// artifact_hash install prints), checked before it is put in place.
	SHA256 string
	// Commit, if set, is called with the new package once it is in place,
	// while the previous install of the same id is still kept aside (for
	// the CLI: the lockfile update). When it fails the install is undone —
	// the previous install, if any, is back, else the package is gone —
	// and InstallFrom returns its error: the package and what Commit
	// records change together or not at all.
	Commit func(*Package) error
	// Deps, if set, is called with the staging copy of the package tree
	// (its manifest checked, still writable) and that manifest, before the
	// tree is made read-only and hashed. It may install dependencies into
	// <content>/DepsDir and returns the distributions it installed
	// ("name==version"); when it returns some, that directory is hashed
	// apart (Package.DepsHash) and left out of the artifact hash, so the
	// package keeps the content hash of its source. Its error stops the
	// install: nothing changes.
	Deps func(content string, m *manifest.Manifest) ([]string, error)
}

// Install installs the package at src (a directory or a .tar.gz archive)
// with the given attestations. See InstallFrom.
func (s *Store) Install(src string, attestations [][]byte) (*Package, error) {
	return s.InstallFrom(src, InstallOptions{Attestations: attestations})
}

// InstallFrom installs the package at src and returns the installed
// package. src is a package directory or a gzip-compressed tar archive
// (recognised by its content, not its name). An install of the same
// package id is replaced. On any error nothing changes: a bad manifest is
// a *manifest.Error, a refused archive an *ArchiveError (ErrBadArchive), a
// cap exceeded ErrTooLarge, a wrong pin ErrPinMismatch.
func (s *Store) InstallFrom(src string, opts InstallOptions) (*Package, error) {
	atts := make([]json.RawMessage, len(opts.Attestations))
	for i, a := range opts.Attestations {
		c, err := compactJSON(a)
		if err != nil {
			return nil, fmt.Errorf("attestation %d is not valid JSON: %w", i+1, err)
		}
		atts[i] = c
	}
	var pin string
	if opts.SHA256 != "" {
		p, err := ParsePin(opts.SHA256)
		if err != nil {
			return nil, err
		}
		pin = p
	}
	fi, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return s.installDir(src, atts, pin, opts)
	}
	return s.installArchive(src, atts, pin, opts)
}

func (s *Store) installDir(srcDir string, atts []json.RawMessage, pin string, opts InstallOptions) (*Package, error) {
	m, err := manifest.LoadCached(srcDir, s.verdicts)
	if err != nil {
		return nil, err
	}
	if err := s.checkNotNested(srcDir); err != nil {
		return nil, err
	}
	fill := func(staging string) error {
		if err := copyTree(srcDir, filepath.Join(staging, contentDir), s.limits); err != nil {
			return fmt.Errorf("copy %s: %w", srcDir, err)
		}
		return nil
	}
	src := source{
		kind:     SourceDirectory,
		name:     srcDir,
		manifest: filepath.Join(srcDir, manifest.FileName),
		want:     m,
		pin:      pin,
		commit:   opts.Commit,
		deps:     opts.Deps,
	}
	return s.installTree(fill, src, atts)
}

func (s *Store) installArchive(archive string, atts []json.RawMessage, pin string, opts InstallOptions) (*Package, error) {
	data, err := readArchive(archive, s.limits.ArchiveBytes)
	if err != nil {
		return nil, err
	}
	sum := sha256Hex(data)
	// The pin is checked on the bytes read, before anything is created.
	if pin != "" && sum != pin {
		return nil, fmt.Errorf("%w: archive %s has SHA-256 %s, the pin is %s; nothing was unpacked", ErrPinMismatch, archive, sum, pin)
	}
	if !isGzip(data) {
		return nil, &ArchiveError{Archive: archive, Err: fmt.Errorf("%w: neither a directory nor a .tar.gz archive (no gzip header)", ErrCorrupt)}
	}
	fill := func(staging string) error {
		return unpackPackage(data, archive, staging, s.limits)
	}
	src := source{
		kind:          SourceArchive,
		name:          archive,
		manifest:      archive + ":" + manifest.FileName,
		archiveSHA256: sum,
		commit:        opts.Commit,
		deps:          opts.Deps,
	}
	return s.installTree(fill, src, atts)
}

// Sources of an install (Package.Source).
const (
	SourceDirectory = "directory"
	SourceArchive   = "archive"
)

// source describes what installTree installs.
type source struct {
	kind          string             // SourceDirectory or SourceArchive
	name          string             // the path given
	manifest      string             // the manifest's name in errors
	want          *manifest.Manifest // if set, the copy must name the same id and version
	pin           string             // if set, the content hash must be sha256:<pin>
	archiveSHA256 string
	commit        func(*Package) error                               // InstallOptions.Commit
	deps          func(string, *manifest.Manifest) ([]string, error) // InstallOptions.Deps
}

// installTree is the common part of every install, under the store lock:
// fill puts the package tree into <staging>/content; installTree checks its
// manifest, makes it read-only, hashes it, writes meta.json and swaps it
// in. The staging directory is removed on every error path (and by
// recover after a crash).
func (s *Store) installTree(fill func(staging string) error, src source, atts []json.RawMessage) (*Package, error) {
	if err := os.MkdirAll(s.root, 0o700); err != nil {
		return nil, fmt.Errorf("create package store: %w", err)
	}
	unlock, err := filelock.Lock(filepath.Join(s.root, lockFile))
	if err != nil {
		return nil, fmt.Errorf("lock package store: %w", err)
	}
	defer unlock()
	if err := s.recover(); err != nil {
		return nil, err
	}

	staging, err := os.MkdirTemp(s.root, stagingPrefix)
	if err != nil {
		return nil, fmt.Errorf("create staging directory: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = removeTree(staging)
		}
	}()
	if err := fill(staging); err != nil {
		return nil, err
	}
	if s.afterFill != nil {
		if err := s.afterFill(staging); err != nil {
			return nil, err
		}
	}
	content := filepath.Join(staging, contentDir)
	// The copy is what gets installed: check it (again, for a directory,
	// in case it changed while it was copied).
	mc, err := manifest.LoadCached(content, s.verdicts)
	if err != nil {
		var me *manifest.Error
		if errors.As(err, &me) {
			me.File = src.manifest
		}
		return nil, err
	}
	if src.want != nil && (mc.PackageID != src.want.PackageID || mc.Version != src.want.Version) {
		return nil, fmt.Errorf("%s changed while it was installed", src.name)
	}
	var installed []string
	if src.deps != nil {
		if installed, err = src.deps(content, mc); err != nil {
			return nil, err
		}
	}
	skip := ""
	if len(installed) > 0 {
		skip = DepsDir
	}
	if err := makeReadOnly(content); err != nil {
		return nil, err
	}
	var depsHash string
	if skip != "" {
		if depsHash, err = ContentHash(filepath.Join(content, DepsDir)); err != nil {
			return nil, fmt.Errorf("the installed dependencies: %w", err)
		}
	}
	sum, err := contentHash(content, nil, skip)
	if err != nil {
		if src.kind == SourceArchive {
			return nil, &ArchiveError{Archive: src.name, Err: fmt.Errorf("%w: %v", ErrLinkEscape, err)}
		}
		return nil, err
	}
	if src.pin != "" && sum != "sha256:"+src.pin {
		return nil, fmt.Errorf("%w: %s has content hash %s, the pin is sha256:%s", ErrPinMismatch, src.name, sum, src.pin)
	}
	md := meta{
		PackageID:     mc.PackageID,
		Version:       mc.Version,
		ArtifactHash:  sum,
		InstalledAt:   s.now().UTC(),
		Source:        src.kind,
		ArchiveSHA256: src.archiveSHA256,
		DepsHash:      depsHash,
		Dependencies:  installed,
		Attestations:  atts,
	}
	if err := writeMeta(filepath.Join(staging, metaFile), &md); err != nil {
		return nil, err
	}
	if err := atomicfile.SyncDir(staging); err != nil {
		return nil, err
	}
	if err := os.Chmod(staging, 0o555); err != nil {
		return nil, err
	}
	p, err := s.swapIn(staging, mc.PackageID, src.commit)
	if err != nil {
		return nil, err
	}
	committed = true
	return p, nil
}

// swapIn renames staging to <root>/<id>, first renaming an existing install
// aside, and returns the package now installed. With commit, it is called
// with that package before the previous install is removed; if it fails,
// the new install is renamed away and the previous one put back (a crash
// in between is repaired by recover the same way: an install renamed
// aside comes back when nothing is at <root>/<id>, but a new install that
// made it is kept).
func (s *Store) swapIn(staging, id string, commit func(*Package) error) (*Package, error) {
	dst := s.pkgDir(id)
	var old string
	if _, err := os.Lstat(dst); err == nil {
		old = filepath.Join(s.root, oldPrefix+id+"."+randomSuffix())
		if err := os.Rename(dst, old); err != nil {
			return nil, fmt.Errorf("move the installed %s aside: %w", id, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	restore := func(cause error) error {
		if old != "" {
			if rerr := os.Rename(old, dst); rerr != nil {
				return fmt.Errorf("install %s: %w (and restoring the previous install failed: %v)", id, cause, rerr)
			}
		}
		return cause
	}
	if err := os.Rename(staging, dst); err != nil {
		return nil, restore(fmt.Errorf("install %s: %w", id, err))
	}
	p, err := s.Get(id)
	if err == nil && commit != nil {
		err = commit(p)
	}
	if err != nil {
		// Undo: the new install goes where recover deletes it.
		gone := filepath.Join(s.root, removedPrefix+id+"."+randomSuffix())
		if rerr := os.Rename(dst, gone); rerr != nil {
			return nil, fmt.Errorf("%w (and undoing the install of %s failed: %v)", err, id, rerr)
		}
		err = restore(err)
		_ = atomicfile.SyncDir(s.root)
		_ = removeTree(gone)
		return nil, err
	}
	if err := atomicfile.SyncDir(s.root); err != nil {
		return nil, err
	}
	if old != "" {
		if err := removeTree(old); err != nil {
			return nil, fmt.Errorf("remove the previous install of %s: %w", id, err)
		}
	}
	return p, nil
}

// recover cleans up after an install or remove that was interrupted:
// staging directories and removed packages are deleted; an install renamed aside is put back if
// nothing replaced it, removed otherwise. Called with the lock held.
func (s *Store) recover() error {
	ents, err := os.ReadDir(s.root)
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := e.Name()
		p := filepath.Join(s.root, name)
		switch {
		case strings.HasPrefix(name, stagingPrefix), strings.HasPrefix(name, removedPrefix):
			if err := removeTree(p); err != nil {
				return fmt.Errorf("remove stale %s: %w", name, err)
			}
		case strings.HasPrefix(name, oldPrefix):
			id, _, _ := strings.Cut(strings.TrimPrefix(name, oldPrefix), ".")
			if checkID(id) == nil {
				if _, err := os.Lstat(s.pkgDir(id)); errors.Is(err, fs.ErrNotExist) {
					if err := os.Rename(p, s.pkgDir(id)); err != nil {
						return fmt.Errorf("restore %s: %w", id, err)
					}
					continue
				}
			}
			if err := removeTree(p); err != nil {
				return fmt.Errorf("remove stale %s: %w", name, err)
			}
		}
	}
	return nil
}

// checkNotNested refuses to install the store into itself or a tree that
// contains the store.
func (s *Store) checkNotNested(srcDir string) error {
	src, err := filepath.Abs(srcDir)
	if err != nil {
		return err
	}
	if r, err := filepath.EvalSymlinks(src); err == nil {
		src = r
	}
	root, err := filepath.Abs(s.root)
	if err != nil {
		return err
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	if within(root, src) || within(src, root) {
		return fmt.Errorf("cannot install %s: it overlaps the package store %s", srcDir, s.root)
	}
	return nil
}

func within(parent, p string) bool {
	rel, err := filepath.Rel(parent, p)
	return err == nil && filepath.IsLocal(rel)
}

// Get returns the installed package id. It reads meta.json and loads the
// installed manifest; it does not recompute the content hash (Verify does).
func (s *Store) Get(id string) (*Package, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	dir := s.pkgDir(id)
	data, err := readMeta(filepath.Join(dir, metaFile))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Lstat(dir); errors.Is(serr, fs.ErrNotExist) {
			return nil, notInstalled(id)
		}
	}
	if err != nil {
		return nil, reason.New(reason.ArtifactMismatch, "package %q: unreadable metadata: %w", id, err)
	}
	var md meta
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&md); err != nil {
		return nil, reason.New(reason.ArtifactMismatch, "package %q: corrupt %s: %w", id, metaFile, err)
	}
	if md.PackageID != id {
		return nil, reason.New(reason.ArtifactMismatch, "package %q: %s names package %q", id, metaFile, md.PackageID)
	}
	content := filepath.Join(dir, contentDir)
	m, err := manifest.LoadCached(content, s.verdicts)
	if err != nil {
		return nil, reason.New(reason.ArtifactMismatch, "package %q: installed manifest: %w", id, err)
	}
	if m.PackageID != id || m.Version != md.Version {
		return nil, reason.New(reason.ArtifactMismatch, "package %q: installed manifest says %s@%s, metadata %s@%s",
			id, m.PackageID, m.Version, id, md.Version)
	}
	p := &Package{
		ID:            id,
		Version:       md.Version,
		Dir:           content,
		Manifest:      m,
		ArtifactHash:  md.ArtifactHash,
		InstalledAt:   md.InstalledAt,
		Source:        md.Source,
		ArchiveSHA256: md.ArchiveSHA256,
		DepsHash:      md.DepsHash,
		Dependencies:  md.Dependencies,
	}
	for i, a := range md.Attestations {
		c, err := compactJSON(a)
		if err != nil {
			return nil, reason.New(reason.ArtifactMismatch, "package %q: attestation %d in %s: %w", id, i+1, metaFile, err)
		}
		p.Attestations = append(p.Attestations, c)
	}
	return p, nil
}

// Verify recomputes the content hash of p.Dir and, when dependencies were
// installed (p.DepsHash), that of its DepsDir, which the first leaves out.
// A different hash, or a tree that cannot be hashed (a dependencies
// directory gone included), is a reason.ArtifactMismatch error.
func (s *Store) Verify(p *Package) error {
	skip := ""
	if p.DepsHash != "" {
		skip = DepsDir
	}
	got, err := contentHash(p.Dir, s.hashes, skip)
	if err != nil {
		return reason.New(reason.ArtifactMismatch, "package %s@%s: cannot hash the installed tree: %w", p.ID, p.Version, err)
	}
	if got != p.ArtifactHash {
		return reason.New(reason.ArtifactMismatch, "package %s@%s: installed content hash %s does not match the recorded %s",
			p.ID, p.Version, got, p.ArtifactHash)
	}
	if skip == "" {
		return nil
	}
	deps, err := contentHash(filepath.Join(p.Dir, DepsDir), s.hashes, "")
	if err != nil {
		return reason.New(reason.ArtifactMismatch, "package %s@%s: cannot hash the installed dependencies: %w", p.ID, p.Version, err)
	}
	if deps != p.DepsHash {
		return reason.New(reason.ArtifactMismatch, "package %s@%s: installed dependencies (%s) hash %s, not the recorded %s",
			p.ID, p.Version, DepsDir, deps, p.DepsHash)
	}
	return nil
}

// Remove uninstalls id.
func (s *Store) Remove(id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if _, err := os.Lstat(s.root); errors.Is(err, fs.ErrNotExist) {
		return notInstalled(id)
	}
	unlock, err := filelock.Lock(filepath.Join(s.root, lockFile))
	if err != nil {
		return fmt.Errorf("lock package store: %w", err)
	}
	defer unlock()
	if err := s.recover(); err != nil {
		return err
	}
	dst := s.pkgDir(id)
	if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
		return notInstalled(id)
	}
	old := filepath.Join(s.root, removedPrefix+id+"."+randomSuffix())
	if err := os.Rename(dst, old); err != nil {
		return fmt.Errorf("remove %s: %w", id, err)
	}
	if err := atomicfile.SyncDir(s.root); err != nil {
		return err
	}
	return removeTree(old)
}

// List returns the installed packages sorted by id. Packages that cannot be
// read are left out and reported in the error, so a caller can show the
// rest: a non-nil error may come with a non-empty list.
func (s *Store) List() ([]*Package, error) {
	ents, err := os.ReadDir(s.root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Package
	var errs []error
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || checkID(e.Name()) != nil {
			continue
		}
		p, err := s.Get(e.Name())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Package) int { return strings.Compare(a.ID, b.ID) })
	return out, errors.Join(errs...)
}

// readMeta reads a package's metadata file: a regular file of at most 16
// MiB (bounded.ReadFile: a symlink, FIFO or device in its place is an
// error, never a hang).
func readMeta(name string) ([]byte, error) {
	return bounded.ReadFile(name, 16<<20)
}

func writeMeta(name string, md *meta) error {
	if md.Attestations == nil {
		md.Attestations = []json.RawMessage{}
	}
	data, err := json.MarshalIndent(md, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// compactJSON returns data as compact JSON (attestations are stored and
// returned in this form).
func compactJSON(data []byte) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
