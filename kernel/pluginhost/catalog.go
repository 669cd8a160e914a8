package pluginhost

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// Prefix starts the file name of every plugin binary:
// agentnode-<kind>-<name>.
const Prefix = "agentnode-"

// Where a plugin binary was found.
const (
	SourceBin  = "bin"  // beside the agentnode executable
	SourceHome = "home" // home.PluginsDir
	SourcePin  = "pin"  // only in pins.json; the file is gone
)

// Hash states reported by Discover.
const (
	HashOK         = "ok"         // pinned, path and SHA-256 match
	HashChanged    = "changed"    // pinned path, but the file's SHA-256 differs
	HashUnpinned   = "unpinned"   // no pin for this file
	HashMissing    = "missing"    // a pin whose file no longer exists
	HashUnreadable = "unreadable" // the file could not be hashed
)

// ErrInvalidName is wrapped by errors about a file that is not named
// agentnode-<kind>-<name>.
var ErrInvalidName = errors.New("not a plugin file name")

// Entry is one plugin binary as discovery sees it.
type Entry struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Path   string `json:"path"`   // absolute, symlinks resolved
	Source string `json:"source"` // SourceBin, SourceHome or SourcePin
	SHA256 string `json:"sha256,omitempty"`
	Pinned bool   `json:"pinned"` // a pin exists for this kind/name and this path
	Hash   string `json:"hash"`   // HashOK, HashChanged, ...
	// PinnedPath is set when the pin of this kind/name names another file.
	PinnedPath string `json:"pinned_path,omitempty"`
	// Shadowed is true when an entry earlier in the search order has the
	// same kind/name; ShadowedBy is that entry's path. Shadowed entries
	// never run.
	Shadowed   bool   `json:"shadowed"`
	ShadowedBy string `json:"shadowed_by,omitempty"`
	// Problem explains HashUnreadable or an unsafe file mode.
	Problem string `json:"problem,omitempty"`
}

// Key is the pin key and short name of the entry: <kind>-<name>.
func (e Entry) Key() string { return Key(e.Kind, e.Name) }

// Key returns "<kind>-<name>", the key of a plugin in pins.json and the
// name used in messages.
func Key(kind, name string) string { return kind + "-" + name }

// FileName returns the binary name of a plugin: agentnode-<kind>-<name>.
func FileName(kind, name string) string { return Prefix + Key(kind, name) }

// ParseFileName splits a binary name agentnode-<kind>-<name>. kind must be
// one of plugin.Kinds and name must match [a-z0-9][a-z0-9-]*.
func ParseFileName(base string) (kind, name string, ok bool) {
	rest, found := strings.CutPrefix(base, Prefix)
	if !found {
		return "", "", false
	}
	kind, name, found = strings.Cut(rest, "-")
	if !found || !validKind(kind) || !ValidName(name) {
		return "", "", false
	}
	return kind, name, true
}

// ValidName reports whether name matches [a-z0-9][a-z0-9-]*.
func ValidName(name string) bool {
	if name == "" || name[0] == '-' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

func validKind(kind string) bool {
	for _, k := range plugin.Kinds {
		if k == kind {
			return true
		}
	}
	return false
}

func kindRank(kind string) int {
	for i, k := range plugin.Kinds {
		if k == kind {
			return i
		}
	}
	return len(plugin.Kinds)
}

// DefaultBinDir returns the directory of the running agentnode executable,
// symlinks resolved. Bundled plugins live there.
func DefaultBinDir() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locate the agentnode executable: %w", err)
	}
	exe, err = filepath.EvalSymlinks(exe)
	if err != nil {
		return "", fmt.Errorf("resolve the agentnode executable: %w", err)
	}
	return filepath.Dir(exe), nil
}

// candidate is a plugin file found in a directory, before pins are applied.
type candidate struct {
	kind, name string
	found      string // path as found: dir/agentnode-<kind>-<name>
	path       string // resolved
	source     string
	err        error // resolving or stat failed
}

// scanDir lists the plugin files in dir. A missing dir is empty.
func scanDir(dir, source string) ([]candidate, error) {
	if dir == "" {
		return nil, nil
	}
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read plugin directory %s: %w", dir, err)
	}
	var out []candidate
	for _, de := range des {
		kind, name, ok := ParseFileName(de.Name())
		if !ok || de.IsDir() {
			continue
		}
		c := candidate{kind: kind, name: name, source: source, found: filepath.Join(dir, de.Name())}
		c.path, c.err = resolveFile(c.found)
		if c.path == "" {
			c.path = c.found
		}
		if c.err == nil || !errors.Is(c.err, errNotRegular) {
			out = append(out, c)
		}
	}
	return out, nil
}

var errNotRegular = errors.New("not a regular file")

// resolveFile returns the absolute, symlink-free path of a regular file.
func resolveFile(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", path, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", path, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return real, fmt.Errorf("stat %s: %w", real, err)
	}
	if !fi.Mode().IsRegular() {
		return real, fmt.Errorf("%s: %w", real, errNotRegular)
	}
	return real, nil
}

// scan finds every plugin file, in search order: the bin directory first,
// then home.PluginsDir(homeDir). Within a directory, files are in name order.
func scan(homeDir, binDir string) ([]candidate, error) {
	bin, err := scanDir(binDir, SourceBin)
	if err != nil {
		return nil, err
	}
	var hm []candidate
	if homeDir != "" {
		if hm, err = scanDir(home.PluginsDir(homeDir), SourceHome); err != nil {
			return nil, err
		}
	}
	// The same directory reached twice (binDir == plugins dir, or a symlink
	// between them) is one location, not a shadowing pair.
	seen := make(map[string]bool, len(bin))
	for _, c := range bin {
		seen[c.path] = true
	}
	out := bin
	for _, c := range hm {
		if !seen[c.path] {
			out = append(out, c)
		}
	}
	return out, nil
}

// Discover lists every plugin binary in the bin directory and in
// home.PluginsDir(homeDir), and every pin whose file is gone. The first
// entry of a kind/name in search order (bin before home) is the one that
// runs; later ones are marked Shadowed. Entries are sorted by kind (in
// plugin.Kinds order), name, then search order.
func Discover(homeDir, binDir string) ([]Entry, error) {
	cands, err := scan(homeDir, binDir)
	if err != nil {
		return nil, err
	}
	pins, err := loadPins(homeDir)
	if err != nil {
		return nil, err
	}
	first := make(map[string]string) // key -> path of the winning entry
	var out []Entry
	for _, c := range cands {
		e := Entry{Kind: c.kind, Name: c.name, Path: c.path, Source: c.source}
		if w, ok := first[e.Key()]; ok {
			e.Shadowed, e.ShadowedBy = true, w
		} else {
			first[e.Key()] = e.Path
		}
		rec, havePin := pins[e.Key()]
		switch {
		case c.err != nil:
			e.Hash, e.Problem = HashUnreadable, c.err.Error()
		default:
			if sum, err := hashFile(e.Path); err != nil {
				e.Hash, e.Problem = HashUnreadable, err.Error()
			} else {
				e.SHA256 = sum
			}
			if err := checkFileMode(e.Path); err != nil && e.Problem == "" {
				e.Problem = err.Error()
			}
		}
		if havePin && rec.Path == e.Path {
			e.Pinned = true
		} else if havePin {
			e.PinnedPath = rec.Path
		}
		if e.Hash == "" {
			switch {
			case !e.Pinned:
				e.Hash = HashUnpinned
			case e.SHA256 == rec.SHA256:
				e.Hash = HashOK
			default:
				e.Hash = HashChanged
			}
		}
		out = append(out, e)
	}
	// Pins whose file is not where discovery looks any more.
	found := make(map[string]bool, len(out))
	for _, e := range out {
		if e.Pinned {
			found[e.Key()] = true
		}
	}
	for key, rec := range pins {
		if found[key] {
			continue
		}
		if _, err := os.Stat(rec.Path); err == nil {
			continue // the pinned file exists elsewhere; its entry shows PinnedPath
		}
		kind, name, _ := strings.Cut(key, "-")
		out = append(out, Entry{Kind: kind, Name: name, Path: rec.Path, Source: SourcePin,
			Pinned: true, Hash: HashMissing, Shadowed: first[key] != "", ShadowedBy: first[key]})
	}
	order := map[string]int{SourceBin: 0, SourceHome: 1, SourcePin: 2}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return kindRank(a.Kind) < kindRank(b.Kind)
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return order[a.Source] < order[b.Source]
	})
	return out, nil
}

// hashFile returns the hex SHA-256 of a file.
func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkFileMode refuses a binary that someone else could replace between
// the pin check and exec: the file or its directory owned by a user other
// than root or us, the file writable by group or others, or its directory
// writable by them without the sticky bit.
func checkFileMode(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if err := checkOwner(path, fi); err != nil {
		return err
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others (mode %v)", path, fi.Mode().Perm())
	}
	dir := filepath.Dir(path)
	di, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	if err := checkOwner(dir, di); err != nil {
		return err
	}
	if di.Mode().Perm()&0o022 != 0 && di.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("directory %s is writable by group or others (mode %v)", dir, di.Mode().Perm())
	}
	return nil
}

// checkOwner accepts files owned by root or by the effective user.
func checkOwner(path string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, neither root nor the current user", path, st.Uid)
	}
	return nil
}
