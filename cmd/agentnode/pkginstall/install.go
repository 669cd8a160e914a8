// Package pkginstall writes the installed package store (kernel/store,
// specs/store.md): `agentnode install` and `agentnode remove`. It is a
// front end: the kernel only reads the store (Get, Verify, List) and never
// imports this package.
//
// Install is all or nothing: the tree (copied from a directory, or
// unpacked from a .tar.gz with every entry checked by cmd/agentnode/tarsafe,
// archive.go) is put into a staging directory inside root, its manifest
// checked and its content hashed there (store.ContentHash, the hash the
// run path verifies), and renamed into place; a replaced install is
// renamed aside first and removed afterwards. Any error leaves the store
// as it was, and recover removes what a crash left. Size caps (Limits)
// apply to both sources. Mutations hold an exclusive lock on
// <root>/.lock.
package pkginstall

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
	"strings"
	"time"

	"github.com/agentnode/agentnode/cmd/agentnode/filelock"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/sdk/atomicfile"
)

// Names inside root; all start with "." so the store never takes them for
// packages.
const (
	lockFile      = ".lock"
	stagingPrefix = ".staging-"
	oldPrefix     = ".old-"
	removedPrefix = ".removed-"
)

// Installer writes a package store; the store's read side (Get, Verify,
// List, Root) is promoted from the embedded *store.Store.
type Installer struct {
	*store.Store
	now    func() time.Time
	limits Limits
	// afterFill, if set, runs after the package tree is in the staging
	// directory; tests use it to inject failures.
	afterFill func(staging string) error
}

// New returns the installer of s (whose verdict cache, if any, it uses
// for the manifests it loads).
func New(s *store.Store) *Installer {
	return &Installer{Store: s, now: time.Now, limits: DefaultLimits}
}

// Open returns the installer of the store rooted at root
// (New(store.Open(root))). Nothing is created until the first Install.
func Open(root string) *Installer { return New(store.Open(root)) }

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
	Commit func(*store.Package) error
	// Deps, if set, is called with the staging copy of the package tree
	// (its manifest checked, still writable) and that manifest, before the
	// tree is made read-only and hashed. It may install dependencies into
	// <content>/store.DepsDir and returns the distributions it installed
	// ("name==version"); when it returns some, that directory is hashed
	// apart (Package.DepsHash) and left out of the artifact hash, so the
	// package keeps the content hash of its source. Its error stops the
	// install: nothing changes.
	Deps func(content string, m *manifest.Manifest) ([]string, error)
}

// Install installs the package at src (a directory or a .tar.gz archive)
// with the given attestations. See InstallFrom.
func (s *Installer) Install(src string, attestations [][]byte) (*store.Package, error) {
	return s.InstallFrom(src, InstallOptions{Attestations: attestations})
}

// InstallFrom installs the package at src and returns the installed
// package. src is a package directory or a gzip-compressed tar archive
// (recognised by its content, not its name). An install of the same
// package id is replaced. On any error nothing changes: a bad manifest is
// a *manifest.Error, a refused archive an *ArchiveError (ErrBadArchive), a
// cap exceeded ErrTooLarge, a wrong pin ErrPinMismatch.
func (s *Installer) InstallFrom(src string, opts InstallOptions) (*store.Package, error) {
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

func (s *Installer) installDir(srcDir string, atts []json.RawMessage, pin string, opts InstallOptions) (*store.Package, error) {
	m, err := manifest.LoadCached(srcDir, s.Verdicts())
	if err != nil {
		return nil, err
	}
	if err := s.checkNotNested(srcDir); err != nil {
		return nil, err
	}
	fill := func(staging string) error {
		if err := copyTree(srcDir, filepath.Join(staging, store.ContentDir), s.limits); err != nil {
			return fmt.Errorf("copy %s: %w", srcDir, err)
		}
		return nil
	}
	src := source{
		kind:     store.SourceDirectory,
		name:     srcDir,
		manifest: filepath.Join(srcDir, manifest.FileName),
		want:     m,
		pin:      pin,
		commit:   opts.Commit,
		deps:     opts.Deps,
	}
	return s.installTree(fill, src, atts)
}

func (s *Installer) installArchive(archive string, atts []json.RawMessage, pin string, opts InstallOptions) (*store.Package, error) {
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
		kind:          store.SourceArchive,
		name:          archive,
		manifest:      archive + ":" + manifest.FileName,
		archiveSHA256: sum,
		commit:        opts.Commit,
		deps:          opts.Deps,
	}
	return s.installTree(fill, src, atts)
}

// source describes what installTree installs.
type source struct {
	kind          string             // store.SourceDirectory or store.SourceArchive
	name          string             // the path given
	manifest      string             // the manifest's name in errors
	want          *manifest.Manifest // if set, the copy must name the same id and version
	pin           string             // if set, the content hash must be sha256:<pin>
	archiveSHA256 string
	commit        func(*store.Package) error                         // InstallOptions.Commit
	deps          func(string, *manifest.Manifest) ([]string, error) // InstallOptions.Deps
}

// installTree is the common part of every install, under the store lock:
// fill puts the package tree into <staging>/content; installTree checks its
// manifest, makes it read-only, hashes it, writes meta.json and swaps it
// in. The staging directory is removed on every error path (and by
// recover after a crash).
func (s *Installer) installTree(fill func(staging string) error, src source, atts []json.RawMessage) (*store.Package, error) {
	if err := os.MkdirAll(s.Root(), 0o700); err != nil {
		return nil, fmt.Errorf("create package store: %w", err)
	}
	unlock, err := filelock.Lock(filepath.Join(s.Root(), lockFile))
	if err != nil {
		return nil, fmt.Errorf("lock package store: %w", err)
	}
	defer unlock()
	if err := s.recover(); err != nil {
		return nil, err
	}

	staging, err := os.MkdirTemp(s.Root(), stagingPrefix)
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
	content := filepath.Join(staging, store.ContentDir)
	// The copy is what gets installed: check it (again, for a directory,
	// in case it changed while it was copied).
	mc, err := manifest.LoadCached(content, s.Verdicts())
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
		skip = store.DepsDir
	}
	if err := makeReadOnly(content); err != nil {
		return nil, err
	}
	var depsHash string
	if skip != "" {
		if depsHash, err = store.ContentHash(filepath.Join(content, store.DepsDir)); err != nil {
			return nil, fmt.Errorf("the installed dependencies: %w", err)
		}
	}
	sum, err := store.ContentHashExcept(content, skip)
	if err != nil {
		// The content refusals carry their kind (store.Refused); only those
		// are the archive's fault, any other failure is the machine's.
		if src.kind == store.SourceArchive && (errors.Is(err, store.ErrLinkEscape) || errors.Is(err, store.ErrSpecialFile)) {
			return nil, &ArchiveError{Archive: src.name, Err: err}
		}
		return nil, err
	}
	if src.pin != "" && sum != "sha256:"+src.pin {
		return nil, fmt.Errorf("%w: %s has content hash %s, the pin is sha256:%s", ErrPinMismatch, src.name, sum, src.pin)
	}
	md := store.Meta{
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
	if err := writeMeta(filepath.Join(staging, store.MetaFile), &md); err != nil {
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
func (s *Installer) swapIn(staging, id string, commit func(*store.Package) error) (*store.Package, error) {
	dst := s.PackageDir(id)
	var old string
	if _, err := os.Lstat(dst); err == nil {
		old = filepath.Join(s.Root(), oldPrefix+id+"."+randomSuffix())
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
		gone := filepath.Join(s.Root(), removedPrefix+id+"."+randomSuffix())
		if rerr := os.Rename(dst, gone); rerr != nil {
			return nil, fmt.Errorf("%w (and undoing the install of %s failed: %v)", err, id, rerr)
		}
		err = restore(err)
		_ = atomicfile.SyncDir(s.Root())
		_ = removeTree(gone)
		return nil, err
	}
	if err := atomicfile.SyncDir(s.Root()); err != nil {
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
func (s *Installer) recover() error {
	ents, err := os.ReadDir(s.Root())
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := e.Name()
		p := filepath.Join(s.Root(), name)
		switch {
		case strings.HasPrefix(name, stagingPrefix), strings.HasPrefix(name, removedPrefix):
			if err := removeTree(p); err != nil {
				return fmt.Errorf("remove stale %s: %w", name, err)
			}
		case strings.HasPrefix(name, oldPrefix):
			id, _, _ := strings.Cut(strings.TrimPrefix(name, oldPrefix), ".")
			if store.CheckID(id) == nil {
				if _, err := os.Lstat(s.PackageDir(id)); errors.Is(err, fs.ErrNotExist) {
					if err := os.Rename(p, s.PackageDir(id)); err != nil {
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
func (s *Installer) checkNotNested(srcDir string) error {
	src, err := filepath.Abs(srcDir)
	if err != nil {
		return err
	}
	if r, err := filepath.EvalSymlinks(src); err == nil {
		src = r
	}
	root, err := filepath.Abs(s.Root())
	if err != nil {
		return err
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	if within(root, src) || within(src, root) {
		return fmt.Errorf("cannot install %s: it overlaps the package store %s", srcDir, s.Root())
	}
	return nil
}

func within(parent, p string) bool {
	rel, err := filepath.Rel(parent, p)
	return err == nil && filepath.IsLocal(rel)
}

// Remove uninstalls id (store.ErrNotInstalled when it is not installed).
func (s *Installer) Remove(id string) error {
	if err := store.CheckID(id); err != nil {
		return err
	}
	if _, err := os.Lstat(s.Root()); errors.Is(err, fs.ErrNotExist) {
		return store.NotInstalled(id)
	}
	unlock, err := filelock.Lock(filepath.Join(s.Root(), lockFile))
	if err != nil {
		return fmt.Errorf("lock package store: %w", err)
	}
	defer unlock()
	if err := s.recover(); err != nil {
		return err
	}
	dst := s.PackageDir(id)
	if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
		return store.NotInstalled(id)
	}
	old := filepath.Join(s.Root(), removedPrefix+id+"."+randomSuffix())
	if err := os.Rename(dst, old); err != nil {
		return fmt.Errorf("remove %s: %w", id, err)
	}
	if err := atomicfile.SyncDir(s.Root()); err != nil {
		return err
	}
	return removeTree(old)
}

func writeMeta(name string, md *store.Meta) error {
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
