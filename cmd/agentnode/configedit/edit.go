// Package configedit writes agentnode's config.json: `agentnode setup`
// (Setup), `agentnode config set/get/list` (Set, Get, List), `agentnode
// trust add-key` (AddTrustKey), the image pins `sandbox build` and `pull`
// write (Set), the report of the AgentNode SDK's keys in `agentnode doctor`
// (SDKKeys), and Save for programs and tests that build a config in code.
//
// It is a front end, not part of the trusted core: a run only reads the
// config, through kernel/config (Load), which keeps the file checks, the
// schema and its validation, and the one walk of the schema's keys
// (config.Keys) that Setup, List and SDKKeys use here. Every write goes
// through the same checks as a load (config.ReadDocument,
// config.ValidateDocument, config.Problems) before anything is written,
// and is atomic: a temporary file in the same directory, fsync, rename,
// fsync of the directory; the file stays 0600.
package configedit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/atomicfile"
)

// KV is one dotted key and its effective value.
type KV struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

// Setup makes sure a valid config exists at path. With no file it creates
// the parent directory (0700) and writes config.Defaults() (0600): created is true.
// With a valid file it adds the leaf keys the file lacks, with their
// defaults, and never changes a value that is there: added lists those keys
// (nil when nothing was missing, and then nothing is written). An existing
// file that is invalid (or writable by group or others) is refused with
// reason.ErrConfigInvalid and left untouched.
func Setup(path string) (created bool, added []string, err error) {
	_, statErr := os.Stat(path)
	switch {
	case errors.Is(statErr, fs.ErrNotExist):
		data, err := marshal(config.Defaults())
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

	doc, err := config.ReadDocument(path)
	if err != nil {
		return false, nil, err
	}
	if err := config.ValidateDocument(path, doc); err != nil {
		return false, nil, err
	}
	leaves, _, err := config.Keys()
	if err != nil {
		return false, nil, err
	}
	for _, k := range leaves {
		if _, ok := config.LookupPath(doc, strings.Split(k.Name, ".")); !ok && k.Default {
			added = append(added, k.Name)
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
	c, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	leaves, _, err := config.Keys()
	if err != nil {
		return nil, err
	}
	doc, err := c.Document()
	if err != nil {
		return nil, err
	}
	kvs := make([]KV, 0, len(leaves))
	for _, k := range leaves {
		v, ok := config.LookupPath(doc, strings.Split(k.Name, "."))
		if !ok && k.SDK != "" {
			continue // an AgentNode SDK key the file does not have
		}
		kvs = append(kvs, KV{Key: k.Name, Value: plain(v)})
	}
	return kvs, nil
}

// Get returns the effective value of key: a leaf, a section (sandbox.limits)
// or a map entry (guard.tool_overrides.PKG/TOOL, llm.providers.NAME.api).
// An optional key without a default that is not set is nil (a section of
// them, guard.max_permissions, an empty map). An unknown key, or a map entry
// that is not there, is reason.ErrConfigInvalid.
func Get(path, key string) (any, error) {
	c, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	return getKey(c, key)
}

// getKey returns the value of key in c; see Get.
func getKey(c *config.Config, key string) (any, error) {
	sk, err := lookupKey(key)
	if err != nil {
		return nil, reason.Wrap(reason.ConfigInvalid, err, "")
	}
	doc, err := c.Document()
	if err != nil {
		return nil, err
	}
	v, ok := config.LookupPath(doc, sk.path)
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
	sk, err := lookupKey(key)
	if err != nil {
		return reason.Wrap(reason.ConfigInvalid, err, "")
	}
	v, err := parseValue(sk, value)
	if err != nil {
		return reason.New(reason.ConfigInvalid, "%s: invalid value %q (%v); want %s", key, value, err, sk.allowed())
	}
	doc, err := config.ReadDocument(path)
	if err != nil {
		return err
	}
	if err := setPath(doc, sk.path, v); err != nil {
		return reason.New(reason.ConfigInvalid, "cannot set %s in config %s: %w", key, path, err)
	}
	if ps, err := config.Problems(doc); err != nil {
		return err
	} else if len(ps) > 0 {
		return reason.New(reason.ConfigInvalid, "cannot set %s: config %s would be invalid: %s", key, path, strings.Join(ps, "; "))
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
	if _, err := (config.TrustKey{ID: id, PublicKey: publicKeyB64}).Ed25519(); err != nil {
		return reason.New(reason.ConfigInvalid, "trust key %q: %w", id, err)
	}
	doc, err := config.ReadDocument(path)
	if err != nil {
		return err
	}
	if err := config.ValidateDocument(path, doc); err != nil {
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
	if err := config.ValidateDocument(path, doc); err != nil {
		return err
	}
	return writeDoc(path, doc)
}

// Save validates c and writes it to path (creating the parent directory
// 0700), replacing any file there. It is for programs and tests that build a
// config in code; the CLI uses Setup and Set, which never drop values.
func Save(path string, c *config.Config) error {
	if err := Validate(c); err != nil {
		return reason.Wrap(reason.ConfigInvalid, err, "config for "+path)
	}
	cp := *c
	cp.Normalize()
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
func Validate(c *config.Config) error {
	doc, err := c.Document()
	if err != nil {
		return err
	}
	ps, err := config.Problems(doc)
	if err != nil {
		return err
	}
	if len(ps) > 0 {
		return reason.New(reason.ConfigInvalid, "invalid config: %s", strings.Join(ps, "; "))
	}
	return nil
}

// writeDoc writes a validated document as the complete effective config
// (absent keys with their defaults), in the schema's key order.
func writeDoc(path string, doc any) error {
	c, err := config.FromDocument(path, doc)
	if err != nil {
		return err
	}
	data, err := marshal(c)
	if err != nil {
		return err
	}
	return writeAtomic(path, data, false)
}

func marshal(c *config.Config) ([]byte, error) {
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
		v, err := config.DecodeStrict([]byte(value))
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
		v, err := config.DecodeStrict([]byte(value))
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
