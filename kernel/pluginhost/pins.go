package pluginhost

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/atomicfile"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// PinsFile is the name of the pin file in home.PluginsDir.
const PinsFile = "pins.json"

// PinRecord is the recorded identity of one plugin binary. (The type
// cannot be called Pin: that is the function that records one.)
type PinRecord struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Path   string `json:"path"`   // absolute, symlinks resolved
	SHA256 string `json:"sha256"` // hex
}

// pinValue is one value of pins.json, keyed by "<kind>-<name>".
type pinValue struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// PinsPath returns the path of pins.json for an agentnode home.
func PinsPath(homeDir string) string { return filepath.Join(home.PluginsDir(homeDir), PinsFile) }

// maxPinsSize bounds pins.json (a few hundred bytes per pinned plugin).
const maxPinsSize = 1 << 20

// loadPins reads pins.json. A missing file is an empty set. A file that is
// malformed, or writable by group or others, is an ErrPluginUnpinned error:
// no plugin can be verified against it.
func loadPins(homeDir string) (map[string]pinValue, error) {
	pins := map[string]pinValue{}
	if homeDir == "" {
		return pins, nil
	}
	path := PinsPath(homeDir)
	// A state file: no symlink, and a FIFO or device fails at once.
	f, err := bounded.Open(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return pins, nil
	}
	if err != nil {
		return nil, reason.New(reason.PluginUnpinned, "read plugin pins: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, reason.New(reason.PluginUnpinned, "read plugin pins: %w", err)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, reason.New(reason.PluginUnpinned, "plugin pins %s are writable by group or others (mode %v); refusing to trust them", path, fi.Mode().Perm())
	}
	data, err := bounded.ReadAll(f, maxPinsSize)
	if err != nil {
		return nil, reason.New(reason.PluginUnpinned, "read plugin pins: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pins); err != nil {
		return nil, reason.New(reason.PluginUnpinned, "plugin pins %s are malformed: %w", path, err)
	}
	for key, rec := range pins {
		if err := validRecord(key, rec); err != nil {
			return nil, reason.New(reason.PluginUnpinned, "plugin pins %s: %w", path, err)
		}
	}
	return pins, nil
}

func validRecord(key string, rec pinValue) error {
	kind, name, ok := strings.Cut(key, "-")
	if !ok || !validKind(kind) || !ValidName(name) {
		return fmt.Errorf("key %q is not <kind>-<name>", key)
	}
	if !filepath.IsAbs(rec.Path) {
		return fmt.Errorf("%s: path %q is not absolute", key, rec.Path)
	}
	if b, err := hex.DecodeString(rec.SHA256); err != nil || len(b) != 32 || strings.ToLower(rec.SHA256) != rec.SHA256 {
		return fmt.Errorf("%s: sha256 %q is not 64 lowercase hex digits", key, rec.SHA256)
	}
	return nil
}

// updatePins applies change to pins.json under an exclusive lock on the
// plugins directory and writes the result atomically (temp file, fsync,
// rename, fsync of the directory: sdk/atomicfile) with mode 0600.
func updatePins(homeDir string, change func(map[string]pinValue)) error {
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

	pins, err := loadPins(homeDir)
	if err != nil {
		return err
	}
	change(pins)
	data, err := json.MarshalIndent(pins, "", "  ")
	if err != nil {
		return fmt.Errorf("encode plugin pins: %w", err)
	}
	data = append(data, '\n')

	if err := atomicfile.WriteFile(PinsPath(homeDir), data, 0o600); err != nil {
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
	real, err := resolveFile(path)
	if err != nil {
		return PinRecord{}, err
	}
	if err := checkFileMode(real); err != nil {
		return PinRecord{}, reason.New(reason.PluginUnpinned, "refusing to pin %s: %w", Key(kind, name), err)
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
	err = updatePins(homeDir, func(m map[string]pinValue) {
		m[Key(p.Kind, p.Name)] = pinValue{Path: p.Path, SHA256: p.SHA256}
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
		d, err := DefaultBinDir()
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
		if c.err != nil {
			return nil, c.err
		}
		p, err := pinFor(c.found)
		if err != nil {
			return nil, err
		}
		pins = append(pins, p)
	}
	if len(pins) == 0 {
		return pins, nil
	}
	err = updatePins(homeDir, func(m map[string]pinValue) {
		for _, p := range pins {
			m[Key(p.Kind, p.Name)] = pinValue{Path: p.Path, SHA256: p.SHA256}
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
