// Package store is the installed package store, home.PackagesDir(home)
// (specs/store.md), as the run path reads it: Get loads a package's
// meta.json and manifest, Verify recomputes its content hash before every
// run (cmd/agentnode/pkglist lists the store with Get). It is in the
// trusted core because a run is allowed only for the exact bytes that were
// installed and attested: the hash check (ContentHash, kernel/treehash) is
// a decision input.
//
// Each package lives in <root>/<package_id>/: content/ is the package tree
// exactly as installed, read-only (files 0444 or 0555, directories 0555),
// and meta.json records the version, the content hash, the install time and
// the attestations supplied at install. The content hash covers exactly
// content/, so Verify can recompute it before every run.
//
// Writing the store — install (from a directory or a checked .tar.gz),
// remove and crash recovery — is a front-end task, `agentnode install` and
// `agentnode remove`: cmd/agentnode/pkginstall, which writes the layout
// and meta.json (Meta) this package reads.
package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/hashcache"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/validcache"
	"github.com/agentnode/agentnode/sdk/python"
)

// ErrNotInstalled is wrapped by the error of Get and Remove for a package
// that is not in the store: `package "x" is not installed`.
var ErrNotInstalled = errors.New("not installed")

// Names inside a package directory. Names inside root starting with "."
// are never packages (the writer's lock and transient directories).
const (
	MetaFile   = "meta.json"
	ContentDir = "content"
)

// Store is the package store rooted at a directory. The zero value is not
// usable; call Open.
type Store struct {
	root string
	// verdicts spares loading a manifest validated before from validating
	// it again (WithVerdicts).
	verdicts *validcache.Cache
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

// Meta is meta.json, as cmd/agentnode/pkginstall writes it.
type Meta struct {
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
	return &Store{root: root}
}

// WithVerdicts makes the store remember which manifests it validated in c,
// and skip their schema validation when it loads them again
// (manifest.LoadCached). It returns s.
func (s *Store) WithVerdicts(c *validcache.Cache) *Store {
	s.verdicts = c
	return s
}

// Verdicts is the cache given to WithVerdicts, or nil.
func (s *Store) Verdicts() *validcache.Cache { return s.verdicts }

// HashCacheFile is the name, in agentnode's state directory, of the cache
// of installed files' digests (WithHashes).
const HashCacheFile = "package-hashes"

// WithHashes makes Verify take the digest of a file that did not change
// since it was last hashed from c (kernel/hashcache) instead of reading it
// again. It returns s.
func (s *Store) WithHashes(c *hashcache.Cache) *Store {
	s.hashes = c
	return s
}

// Root is the store's directory.
func (s *Store) Root() string { return s.root }

// PackageDir is the directory of package id in the store, <root>/<id>
// (id must have passed CheckID).
func (s *Store) PackageDir(id string) string { return filepath.Join(s.root, id) }

// CheckID refuses a package id that is not [a-z0-9-]{3,60}, before it is
// used as a path.
func CheckID(id string) error {
	if !manifest.ValidPackageID(id) {
		return fmt.Errorf("invalid package id %q (want 3 to 60 characters of a-z, 0-9 and -)", id)
	}
	return nil
}

// NotInstalled is the error for a package id that is not in the store
// (wraps ErrNotInstalled).
func NotInstalled(id string) error {
	return fmt.Errorf("package %q is %w", id, ErrNotInstalled)
}

// Sources of an install (Package.Source).
const (
	SourceDirectory = "directory"
	SourceArchive   = "archive"
)

// Get returns the installed package id. It reads meta.json and loads the
// installed manifest; it does not recompute the content hash (Verify does).
func (s *Store) Get(id string) (*Package, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	dir := s.PackageDir(id)
	data, err := readMeta(filepath.Join(dir, MetaFile))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Lstat(dir); errors.Is(serr, fs.ErrNotExist) {
			return nil, NotInstalled(id)
		}
	}
	if err != nil {
		return nil, reason.New(reason.ArtifactMismatch, "package %q: unreadable metadata: %w", id, err)
	}
	var md Meta
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&md); err != nil {
		return nil, reason.New(reason.ArtifactMismatch, "package %q: corrupt %s: %w", id, MetaFile, err)
	}
	if md.PackageID != id {
		return nil, reason.New(reason.ArtifactMismatch, "package %q: %s names package %q", id, MetaFile, md.PackageID)
	}
	content := filepath.Join(dir, ContentDir)
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
			return nil, reason.New(reason.ArtifactMismatch, "package %q: attestation %d in %s: %w", id, i+1, MetaFile, err)
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

// readMeta reads a package's metadata file: a regular file of at most 16
// MiB (bounded.ReadFile: a symlink, FIFO or device in its place is an
// error, never a hang).
func readMeta(name string) ([]byte, error) {
	return bounded.ReadFile(name, 16<<20)
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
