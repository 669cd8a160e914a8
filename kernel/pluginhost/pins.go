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
	"strings"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/reason"
)

// PinsFile is the name of the pin file in home.PluginsDir. The kernel
// reads it before every launch (LoadPins, Host.locate); `agentnode plugins
// pin` and setup write it (cmd/agentnode/plugincat).
const PinsFile = "pins.json"

// PinValue is one value of pins.json, keyed by Key(kind, name): the
// recorded identity of one plugin binary.
type PinValue struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// PinsPath returns the path of pins.json for an agentnode home.
func PinsPath(homeDir string) string { return filepath.Join(home.PluginsDir(homeDir), PinsFile) }

// maxPinsSize bounds pins.json (a few hundred bytes per pinned plugin).
const maxPinsSize = 1 << 20

// LoadPins reads pins.json. A missing file is an empty set. A file that is
// malformed, or writable by group or others, is an ErrPluginUnpinned error:
// no plugin can be verified against it.
func LoadPins(homeDir string) (map[string]PinValue, error) {
	pins := map[string]PinValue{}
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

func validRecord(key string, rec PinValue) error {
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
