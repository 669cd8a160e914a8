// Package plugincat is the front end's view of the plugin binaries:
// `agentnode plugins list` and doctor list them (Discover) and `plugins
// pin` and setup record their identity in pins.json (Pin, PinBundled).
//
// It sits outside the kernel because no run lists or pins a plugin: a
// launch only reads pins.json and checks the binary it finds against its
// pin (pluginhost.Lookup, which looks only for the one file it needs).
// The parts both use stay there, one of each: the file-name rule, the pin
// file's reader and its validation (pluginhost.LoadPins) and the
// file-mode check (pluginhost.CheckFileMode).
package plugincat

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/atomicfile"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// SourcePin is the Source of an entry found only in pins.json: its file
// is gone. (SourceBin and SourceHome are the others.)
const SourcePin = "pin"

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
func (e Entry) Key() string { return pluginhost.Key(e.Kind, e.Name) }

func kindRank(kind string) int {
	for i, k := range plugin.Kinds {
		if k == kind {
			return i
		}
	}
	return len(plugin.Kinds)
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
	pins, err := pluginhost.LoadPins(homeDir)
	if err != nil {
		return nil, err
	}
	first := make(map[string]string) // key -> path of the winning entry
	var out []Entry
	for _, c := range cands {
		e := Entry{Kind: c.Kind, Name: c.Name, Path: c.Path, Source: c.Source}
		if w, ok := first[e.Key()]; ok {
			e.Shadowed, e.ShadowedBy = true, w
		} else {
			first[e.Key()] = e.Path
		}
		rec, havePin := pins[e.Key()]
		switch {
		case c.Err != nil:
			e.Hash, e.Problem = HashUnreadable, c.Err.Error()
		default:
			if sum, err := hashFile(e.Path); err != nil {
				e.Hash, e.Problem = HashUnreadable, err.Error()
			} else {
				e.SHA256 = sum
			}
			if err := pluginhost.CheckFileMode(e.Path); err != nil && e.Problem == "" {
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

// PinRecord is the recorded identity of one plugin binary. (The type
// cannot be called Pin: that is the function that records one.)
type PinRecord struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Path   string `json:"path"`   // absolute, symlinks resolved
	SHA256 string `json:"sha256"` // hex
}

// updatePins applies change to pins.json under an exclusive lock on the
// plugins directory and writes the result atomically (temp file, fsync,
// rename, fsync of the directory: sdk/atomicfile) with mode 0600.
func updatePins(homeDir string, change func(map[string]pluginhost.PinValue)) error {
	dir := home.PluginsDir(homeDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer d.Close()
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	defer syscall.Flock(int(d.Fd()), syscall.LOCK_UN) //nolint:errcheck // released on close anyway

	pins, err := pluginhost.LoadPins(homeDir)
	if err != nil {
		return err
	}
	change(pins)
	data, err := json.MarshalIndent(pins, "", "  ")
	if err != nil {
		return fmt.Errorf("encode plugin pins: %w", err)
	}
	data = append(data, '\n')

	if err := atomicfile.WriteFile(pluginhost.PinsPath(homeDir), data, 0o600); err != nil {
		return fmt.Errorf("write plugin pins: %w", err)
	}
	return nil
}

// pinFor computes the pin of one plugin file without writing it.
func pinFor(path string) (PinRecord, error) {
	kind, name, ok := ParseFileName(filepath.Base(path))
	if !ok {
		return PinRecord{}, fmt.Errorf("%w: %q (want agentnode-<kind>-<name>, kind one of %s, name [a-z0-9][a-z0-9-]*)",
			ErrInvalidName, filepath.Base(path), strings.Join(plugin.Kinds, "|"))
	}
	real, err := pluginhost.ResolveFile(path)
	if err != nil {
		return PinRecord{}, err
	}
	if err := pluginhost.CheckFileMode(real); err != nil {
		return PinRecord{}, reason.New(reason.PluginUnpinned, "refusing to pin %s: %w", pluginhost.Key(kind, name), err)
	}
	sum, err := hashFile(real)
	if err != nil {
		return PinRecord{}, err
	}
	return PinRecord{Kind: kind, Name: name, Path: real, SHA256: sum}, nil
}

// Pin records the SHA-256 and the resolved absolute path of the plugin
// binary at path in pins.json, replacing an earlier pin of the same
// kind/name. path must be named agentnode-<kind>-<name> (else the error
// wraps ErrInvalidName); it may be a symlink, in which case the pin names
// the file it resolves to, which must not be writable by group or others.
func Pin(homeDir, path string) (PinRecord, error) {
	p, err := pinFor(path)
	if err != nil {
		return PinRecord{}, err
	}
	err = updatePins(homeDir, func(m map[string]pluginhost.PinValue) {
		m[pluginhost.Key(p.Kind, p.Name)] = pluginhost.PinValue{Path: p.Path, SHA256: p.SHA256}
	})
	if err != nil {
		return PinRecord{}, err
	}
	return p, nil
}

// PinBundled pins every plugin binary (agentnode-<kind>-<name>) in binDir,
// the directory of the agentnode executable when binDir is empty, in one
// atomic update of pins.json. `agentnode setup` calls it. Files whose names
// do not parse are ignored; a plugin that cannot be pinned fails the whole
// call and nothing is written.
func PinBundled(homeDir, binDir string) ([]PinRecord, error) {
	if binDir == "" {
		d, err := pluginhost.DefaultBinDir()
		if err != nil {
			return nil, err
		}
		binDir = d
	}
	cands, err := scanDir(binDir, SourceBin)
	if err != nil {
		return nil, err
	}
	var pins []PinRecord
	for _, c := range cands {
		if c.Err != nil {
			return nil, c.Err
		}
		p, err := pinFor(c.Found)
		if err != nil {
			return nil, err
		}
		pins = append(pins, p)
	}
	if len(pins) == 0 {
		return pins, nil
	}
	err = updatePins(homeDir, func(m map[string]pluginhost.PinValue) {
		for _, p := range pins {
			m[pluginhost.Key(p.Kind, p.Name)] = pluginhost.PinValue{Path: p.Path, SHA256: p.SHA256}
		}
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(pins, func(i, j int) bool {
		if pins[i].Kind != pins[j].Kind {
			return kindRank(pins[i].Kind) < kindRank(pins[j].Kind)
		}
		return pins[i].Name < pins[j].Name
	})
	return pins, nil
}
