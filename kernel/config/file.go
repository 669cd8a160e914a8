package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/validcache"
)

// MaxFileSize bounds config.json; a larger file is refused unread.
// MaxDepth bounds its nesting (the deepest key, guard.rate_limits.PKG.burst,
// is at depth 4); a deeper file is refused before it is parsed.
const (
	MaxFileSize = 1 << 20
	MaxDepth    = 64
)

// Load reads and validates the config at path and returns it with absent
// leaf keys set to their defaults. A missing file wraps reason.ErrNotSetUp;
// every other problem wraps reason.ErrConfigInvalid and names the file and
// the key.
func Load(path string) (*Config, error) { return LoadCached(path, nil) }

// verdictKind names config.json's verdicts in a validcache.Cache.
const verdictKind = "config.json"

// LoadCached is Load, except that a file whose exact bytes this binary
// validated before (a verdict in cache) is not validated against the schema
// again. Everything else (the file checks, strict decoding, conversion) is
// done every time, and a file that does not validate is always reported in
// full.
func LoadCached(path string, cache *validcache.Cache) (*Config, error) {
	doc, data, err := readDoc(path)
	if err != nil {
		return nil, err
	}
	if !cache.Valid(verdictKind, data) {
		if err := validate(path, doc); err != nil {
			return nil, err
		}
		cache.Remember(verdictKind, data)
	}
	return toConfig(path, doc)
}

// Plugins is what Peek reads: the plugins a config names.
type Plugins struct {
	Trust      string
	Inspectors []string
}

// Peek reads the plugins the config at path names, without validating it
// (only the file checks of Load and a strict parse): for starting them
// early, never for deciding anything. ok is false when the file cannot be
// read or parsed.
func Peek(path string) (p Plugins, ok bool) {
	doc, _, err := readDoc(path)
	if err != nil {
		return Plugins{}, false
	}
	root, _ := doc.(map[string]any)
	trust, _ := root["trust"].(map[string]any)
	p.Trust, _ = trust["plugin"].(string)
	guard, _ := root["guard"].(map[string]any)
	list, _ := guard["inspectors"].([]any)
	for _, v := range list {
		if name, ok := v.(string); ok {
			p.Inspectors = append(p.Inspectors, name)
		}
	}
	return p, true
}

// Document returns c as a generic JSON document, as ReadDocument returns
// a file's.
func (c *Config) Document() (any, error) {
	cp := *c
	cp.Normalize()
	data, err := json.Marshal(&cp)
	if err != nil {
		return nil, reason.New(reason.ConfigInvalid, "encode config: %w", err)
	}
	doc, err := decodeStrict(data)
	if err != nil {
		return nil, reason.New(reason.ConfigInvalid, "encode config: %w", err)
	}
	return doc, nil
}

// readDoc reads and parses the file at path, refusing a missing file
// (not_set_up), an unreadable, oversized or group/world-writable one, and
// anything that is not a single JSON value without duplicate keys
// (config_invalid).
func readDoc(path string) (doc any, data []byte, err error) {
	// O_NONBLOCK, then fstat: a FIFO (or device) in place of the file is
	// refused at once instead of blocking every command. A symlink is
	// followed (see writeAtomic); what it leads to must be a regular file.
	f, err := bounded.OpenFollow(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, &reason.Error{
			Code: reason.NotSetUp,
			Msg:  fmt.Sprintf("agentnode is not set up: run `agentnode setup` (no config at %s)", path),
			Err:  err,
		}
	}
	if errors.Is(err, bounded.ErrNotRegular) {
		return nil, nil, reason.New(reason.ConfigInvalid, "config %w", err) // "config PATH is a named pipe (FIFO): ..."
	}
	if err != nil {
		return nil, nil, reason.New(reason.ConfigInvalid, "cannot read config %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, reason.New(reason.ConfigInvalid, "cannot read config %s: %w", path, err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o022 != 0 {
		return nil, nil, reason.New(reason.ConfigInvalid, "config %s is writable by group or others (mode %04o): check its contents, then run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	if fi.Size() > MaxFileSize {
		return nil, nil, reason.New(reason.ConfigInvalid, "config %s is larger than %d bytes", path, MaxFileSize)
	}
	data, err = io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, nil, reason.New(reason.ConfigInvalid, "cannot read config %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, nil, reason.New(reason.ConfigInvalid, "config %s is larger than %d bytes", path, MaxFileSize)
	}
	doc, err = decodeStrict(data)
	if err != nil {
		return nil, nil, reason.New(reason.ConfigInvalid, "config %s is invalid: %w", path, err)
	}
	return doc, data, nil
}

// ReadDocument reads and parses the config at path as a generic JSON
// document (numbers as json.Number), with every file check of Load
// (readDoc) but without validating it: for the front end that edits the
// file (cmd/agentnode/configedit), which validates the result.
func ReadDocument(path string) (any, error) {
	doc, _, err := readDoc(path)
	return doc, err
}

// ValidateDocument checks doc as Load checks the file at path: an error
// wrapping reason.ErrConfigInvalid that names the file and every problem.
func ValidateDocument(path string, doc any) error { return validate(path, doc) }

// Problems checks doc against the schema and the rules beyond it and
// returns its problems ("key: what is wrong"), sorted by key; an error
// only when the schema itself cannot be loaded.
func Problems(doc any) ([]string, error) {
	ps, err := check(doc)
	if err != nil {
		return nil, reason.Wrap(reason.ConfigInvalid, err, "")
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out, nil
}

// FromDocument decodes a validated document over Defaults(), as Load does.
func FromDocument(path string, doc any) (*Config, error) { return toConfig(path, doc) }

// validate checks doc and reports every problem with the file name.
func validate(path string, doc any) error {
	ps, err := check(doc)
	if err != nil {
		return reason.Wrap(reason.ConfigInvalid, err, "")
	}
	if len(ps) > 0 {
		return reason.New(reason.ConfigInvalid, "config %s is invalid: %s", path, joinProblems(ps))
	}
	return nil
}

func joinProblems(ps []problem) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, "; ")
}

// toConfig decodes a validated document over Defaults().
func toConfig(path string, doc any) (*Config, error) {
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, reason.New(reason.ConfigInvalid, "config %s: %w", path, err)
	}
	c := Defaults()
	if err := json.Unmarshal(data, c); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, reason.New(reason.ConfigInvalid, "config %s is invalid: %s: must be %s (write integers without a fraction): %w", path, te.Field, te.Type, err)
		}
		return nil, reason.New(reason.ConfigInvalid, "config %s is invalid: %w", path, err)
	}
	c.Normalize()
	return c, nil
}
