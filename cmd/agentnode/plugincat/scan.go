package plugincat

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// Where a plugin binary was found.
const (
	SourceBin  = "bin"  // beside the agentnode executable
	SourceHome = "home" // home.PluginsDir
)

// candidate is a plugin file found in a directory, before pins are
// applied.
type candidate struct {
	Kind, Name string
	Found      string // path as found: dir/agentnode-<kind>-<name>
	Path       string // resolved
	Source     string // SourceBin or SourceHome
	Err        error  // resolving or stat failed
}

// scanDir lists the plugin files in dir (ParseFileName), in
// name order. A missing dir is empty. A directory or a name that resolves
// to something other than a regular file is passed over, as a launch
// passes it over.
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
		c := candidate{Kind: kind, Name: name, Source: source, Found: filepath.Join(dir, de.Name())}
		c.Path, c.Err = pluginhost.ResolveFile(c.Found)
		if c.Path == "" {
			c.Path = c.Found
		}
		if c.Err == nil || !errors.Is(c.Err, pluginhost.ErrNotRegular) {
			out = append(out, c)
		}
	}
	return out, nil
}

// scan lists every plugin file in the search order of a launch
// (kernel/pluginhost): the bin directory first, then
// home.PluginsDir(homeDir). The first of a kind/name is the one a launch
// runs; TestScanOrderMatchesLaunch checks the two agree.
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
		seen[c.Path] = true
	}
	out := bin
	for _, c := range hm {
		if !seen[c.Path] {
			out = append(out, c)
		}
	}
	return out, nil
}

// ParseFileName splits a plugin binary's name agentnode-<kind>-<name>
// (pluginhost.FileName). kind must be one of plugin.Kinds and name must
// match [a-z0-9][a-z0-9-]* (pluginhost.ValidName).
func ParseFileName(base string) (kind, name string, ok bool) {
	rest, found := strings.CutPrefix(base, pluginhost.Prefix)
	if !found {
		return "", "", false
	}
	kind, name, found = strings.Cut(rest, "-")
	if !found || !slices.Contains(plugin.Kinds, kind) || !pluginhost.ValidName(name) {
		return "", "", false
	}
	return kind, name, true
}
