package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/validcache"
	"github.com/agentnode/agentnode/sdk/atomicfile"
)

// MaxFileSize bounds config.json; a larger file is refused unread.
// MaxDepth bounds its nesting (the deepest key, guard.rate_limits.PKG.burst,
// is at depth 4); a deeper file is refused before it is parsed.
const (
	MaxFileSize = 1 << 20
	MaxDepth    = 64
)

// KV is one dotted key and its effective value.
type KV struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

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

// Setup makes sure a valid config exists at path. With no file it creates
// the parent directory (0700) and writes Defaults() (0600): created is true.
// With a valid file it adds the leaf keys the file lacks, with their
// defaults, and never changes a value that is there: added lists those keys
// (nil when nothing was missing, and then nothing is written). An existing
// file that is invalid (or writable by group or others) is refused with
// reason.ErrConfigInvalid and left untouched.
func Setup(path string) (created bool, added []string, err error) {
	_, statErr := os.Stat(path)
	switch {
	case errors.Is(statErr, fs.ErrNotExist):
		data, err := marshal(Defaults())
		if err != nil {
			return false, nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return false, nil, reason.New(reason.ConfigInvalid, "create config directory %s: %w", filepath.Dir(path), err)
		}
		if err := writeAtomic(path, data, true); err != nil {
			return false, nil, err
		}
		return true, nil, nil
	case statErr != nil:
		return false, nil, reason.New(reason.ConfigInvalid, "cannot read config %s: %w", path, statErr)
	}

	doc, _, err := readDoc(path)
	if err != nil {
		return false, nil, err
	}
	if err := validate(path, doc); err != nil {
		return false, nil, err
	}
	st, err := loadSchema()
	if err != nil {
		return false, nil, reason.Wrap(reason.ConfigInvalid, err, "")
	}
	leaves, _ := leafKeys(st)
	for _, k := range leaves {
		if _, ok := lookupPath(doc, strings.Split(k, ".")); !ok && hasDefault(st, k) {
			added = append(added, k)
		}
	}
	if len(added) == 0 {
		return false, nil, nil
	}
	if err := writeDoc(path, doc); err != nil {
		return false, nil, err
	}
	return false, added, nil
}

// List returns every leaf key of the schema with its effective value (the
// file's, or the default when the file lacks it), sorted by key; the
// AgentNode SDK's own keys only when the file has them. Values are
// string, bool, int64, float64, []any or map[string]any; an optional key
// without a default that is not set (guard.max_permissions.network) is nil.
func List(path string) ([]KV, error) {
	c, err := Load(path)
	if err != nil {
		return nil, err
	}
	st, err := loadSchema()
	if err != nil {
		return nil, reason.Wrap(reason.ConfigInvalid, err, "")
	}
	doc, err := c.generic()
	if err != nil {
		return nil, err
	}
	leaves, _ := leafKeys(st)
	kvs := make([]KV, 0, len(leaves))
	for _, k := range leaves {
		v, ok := lookupPath(doc, strings.Split(k, "."))
		if !ok && sdkStatus(st, k) != "" {
			continue // an AgentNode SDK key the file does not have
		}
		kvs = append(kvs, KV{Key: k, Value: plain(v)})
	}
	return kvs, nil
}

// Get returns the effective value of key: a leaf, a section (sandbox.limits)
// or a map entry (guard.tool_overrides.PKG/TOOL, llm.providers.NAME.api).
// An optional key without a default that is not set is nil (a section of
// them, guard.max_permissions, an empty map). An unknown key, or a map entry
// that is not there, is reason.ErrConfigInvalid.
func Get(path, key string) (any, error) {
	c, err := Load(path)
	if err != nil {
		return nil, err
	}
	return c.Get(key)
}

// Get returns the value of key in c; see the package function Get.
func (c *Config) Get(key string) (any, error) {
	st, err := loadSchema()
	if err != nil {
		return nil, reason.Wrap(reason.ConfigInvalid, err, "")
	}
	sk, err := lookupKey(st, key)
	if err != nil {
		return nil, reason.Wrap(reason.ConfigInvalid, err, "")
	}
	doc, err := c.generic()
	if err != nil {
		return nil, err
	}
	v, ok := lookupPath(doc, sk.path)
	switch {
	case ok:
		return plain(v), nil
	case sk.entry:
		return nil, reason.New(reason.ConfigInvalid, "config key %q is not set", key)
	case sk.node["properties"] != nil:
		// A section without defaults that is not set (guard.max_permissions).
		return map[string]any{}, nil
	}
	// An optional leaf that is not set (guard.max_permissions.network):
	// null. Every other leaf has a default and is always present.
	return nil, nil
}

// Set sets key to value in the config at path and writes the file. The value
// is parsed by the key's type: true/false, an integer, a number, a string as
// is, or JSON for arrays and objects. Keys below a map add or replace one
// entry (guard.tool_overrides.PKG/TOOL deny). The whole result is validated
// before anything is written; on any error the file is left as it was.
// Set may repair an invalid file when the result is valid; a file that is
// not JSON or has duplicate keys is refused.
func Set(path, key, value string) error {
	st, err := loadSchema()
	if err != nil {
		return reason.Wrap(reason.ConfigInvalid, err, "")
	}
	sk, err := lookupKey(st, key)
	if err != nil {
		return reason.Wrap(reason.ConfigInvalid, err, "")
	}
	v, err := parseValue(sk, value)
	if err != nil {
		return reason.New(reason.ConfigInvalid, "%s: invalid value %q (%v); want %s", key, value, err, sk.allowed())
	}
	doc, _, err := readDoc(path)
	if err != nil {
		return err
	}
	if err := setPath(doc, sk.path, v); err != nil {
		return reason.New(reason.ConfigInvalid, "cannot set %s in config %s: %w", key, path, err)
	}
	if ps, err := check(doc); err != nil {
		return reason.Wrap(reason.ConfigInvalid, err, "")
	} else if len(ps) > 0 {
		return reason.New(reason.ConfigInvalid, "cannot set %s: config %s would be invalid: %s", key, path, joinProblems(ps))
	}
	return writeDoc(path, doc)
}

// keyIDPattern is the trust key id pattern of the schema.
var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// AddTrustKey pins an Ed25519 issuer key in trust.keys. publicKeyB64 is the
// raw 32-byte key in standard base64 with padding. Adding the same id with
// the same key again is a no-op; the same id with a different key is refused
// (reason.ErrConfigInvalid) and nothing is written.
func AddTrustKey(path, id, publicKeyB64 string) error {
	if !keyIDPattern.MatchString(id) {
		return reason.New(reason.ConfigInvalid, "trust key id %q is invalid: want 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", id)
	}
	if _, err := decodePublicKey(publicKeyB64); err != nil {
		return reason.New(reason.ConfigInvalid, "trust key %q: %w", id, err)
	}
	doc, _, err := readDoc(path)
	if err != nil {
		return err
	}
	if err := validate(path, doc); err != nil {
		return err
	}
	trust := doc.(map[string]any)["trust"].(map[string]any) // required by the schema
	keys, _ := trust["keys"].([]any)
	for _, k := range keys {
		obj := k.(map[string]any)
		if obj["id"] != id {
			continue
		}
		if obj["public_key"] == publicKeyB64 {
			return nil
		}
		return reason.New(reason.ConfigInvalid, "trust key %q is already pinned in %s with a different public key; choose another id", id, path)
	}
	trust["keys"] = append(keys, map[string]any{"id": id, "public_key": publicKeyB64})
	if err := validate(path, doc); err != nil {
		return err
	}
	return writeDoc(path, doc)
}

// Save validates c and writes it to path (creating the parent directory
// 0700), replacing any file there. It is for programs and tests that build a
// config in code; the CLI uses Setup and Set, which never drop values.
func Save(path string, c *Config) error {
	if err := c.Validate(); err != nil {
		return reason.Wrap(reason.ConfigInvalid, err, "config for "+path)
	}
	cp := *c
	cp.normalize()
	data, err := marshal(&cp)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return reason.New(reason.ConfigInvalid, "create config directory %s: %w", filepath.Dir(path), err)
	}
	return writeAtomic(path, data, false)
}

// Validate checks c against the schema and the rules beyond it. Nil maps and
// slices count as empty.
func (c *Config) Validate() error {
	doc, err := c.generic()
	if err != nil {
		return err
	}
	ps, err := check(doc)
	if err != nil {
		return reason.Wrap(reason.ConfigInvalid, err, "")
	}
	if len(ps) > 0 {
		return reason.New(reason.ConfigInvalid, "invalid config: %s", joinProblems(ps))
	}
	return nil
}

// generic returns c as a generic JSON document.
func (c *Config) generic() (any, error) {
	cp := *c
	cp.normalize()
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
	c.normalize()
	return c, nil
}

// writeDoc writes a validated document as the complete effective config
// (absent keys with their defaults), in the schema's key order.
func writeDoc(path string, doc any) error {
	c, err := toConfig(path, doc)
	if err != nil {
		return err
	}
	data, err := marshal(c)
	if err != nil {
		return err
	}
	return writeAtomic(path, data, false)
}

func marshal(c *Config) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(c); err != nil {
		return nil, reason.New(reason.ConfigInvalid, "encode config: %w", err)
	}
	return buf.Bytes(), nil
}

// writeAtomic replaces path with data (sdk/atomicfile): a 0600 temporary
// file in the same directory, fsync, rename (or, with exclusive, a hard
// link that fails if path appeared meanwhile), fsync of the directory. An
// existing symlink at path is followed, so the file it points to is
// replaced.
func writeAtomic(path string, data []byte, exclusive bool) error {
	var flags []atomicfile.Flag
	verb := "write"
	if exclusive {
		flags, verb = []atomicfile.Flag{atomicfile.Exclusive}, "create"
	} else if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	if err := atomicfile.WriteFile(path, data, 0o600, flags...); err != nil {
		return reason.New(reason.ConfigInvalid, "%s config %s: %w", verb, path, err)
	}
	return nil
}

// parseValue parses a command-line value by the key's type.
func parseValue(sk *schemaKey, value string) (any, error) {
	switch t := sk.typ(); t {
	case "string":
		return value, nil
	case typeStringOrObject:
		// A tool override: a decision as typed, or an object (the
		// AgentNode SDK's form) as JSON.
		if !strings.HasPrefix(strings.TrimSpace(value), "{") {
			return value, nil
		}
		v, err := decodeStrict([]byte(value))
		if err != nil {
			return nil, err
		}
		if _, ok := v.(map[string]any); !ok {
			return nil, errors.New("not a JSON object")
		}
		return v, nil
	case "boolean":
		switch value {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, errors.New("not a boolean")
	case "integer":
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return nil, errors.New("not an integer")
		}
		return json.Number(strconv.FormatInt(n, 10)), nil
	case "number":
		f, err := strconv.ParseFloat(value, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, errors.New("not a finite number")
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	default:
		v, err := decodeStrict([]byte(value))
		if err != nil {
			return nil, err
		}
		switch t {
		case "array":
			if _, ok := v.([]any); !ok {
				return nil, errors.New("not a JSON array")
			}
		case "object":
			if _, ok := v.(map[string]any); !ok {
				return nil, errors.New("not a JSON object")
			}
		}
		return v, nil
	}
}

// setPath sets the value at an object path, creating missing objects on the
// way.
func setPath(doc any, path []string, v any) error {
	node, ok := doc.(map[string]any)
	if !ok {
		return errors.New("the file is not a JSON object")
	}
	for i, p := range path[:len(path)-1] {
		next, exists := node[p]
		if !exists {
			m := map[string]any{}
			node[p] = m
			node = m
			continue
		}
		if node, ok = next.(map[string]any); !ok {
			return fmt.Errorf("%s is not an object", strings.Join(path[:i+1], "."))
		}
	}
	node[path[len(path)-1]] = v
	return nil
}

// plain converts json.Number to int64 or float64, recursively.
func plain(v any) any {
	switch t := v.(type) {
	case json.Number:
		if n, err := t.Int64(); err == nil {
			return n
		}
		f, _ := t.Float64()
		return f
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = plain(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = plain(x)
		}
		return out
	}
	return v
}
