package lockfile

import (
	"fmt"
)

// Version is the lockfile_version agentnode reads and writes.
const Version = "0.1"

// Top-level members.
const (
	FieldLockfileVersion = "lockfile_version"
	FieldUpdatedAt       = "updated_at"
	FieldPackages        = "packages"
	FieldStructureDigest = "structure_digest"
	FieldSeal            = "_agentnode_seal"
	FieldIntegrity       = "_integrity"
	// FieldDepsHash is the entry member holding the content hash of the
	// dependencies installed into the package (store.Package.DepsHash).
	FieldDepsHash = "deps_hash"
)

var topLevelFields = []string{FieldLockfileVersion, FieldUpdatedAt, FieldPackages, FieldStructureDigest, FieldSeal}

// canonicalV1 are the fields _integrity covers in canonical_version 1;
// V2 adds _signatures, V3 also publisher_slug (AgentNode).
var canonicalV1 = []string{
	"version", "package_type", "runtime", "entrypoint", "artifact_hash", "tools", "permissions",
	"mcp_command", "mcp_env_keys", "remote_endpoint", "connector", "agent", "prompts", "resources",
	"assets", "sandboxed", "sandbox_volume", "mcp_preinstalled", "mcp_preinstall",
	"mcp_sandbox_volume", "mcp_preinstall_command", "mcp_allowed_domains", "env_requirements",
}

var (
	canonicalV2 = append(append([]string{}, canonicalV1...), "_signatures")
	canonicalV3 = append(append([]string{}, canonicalV2...), "publisher_slug")
)

// CanonicalFields returns the fields _integrity covers in canonical_version
// v (1, 2 or 3), or nil for another version.
func CanonicalFields(v int) []string {
	switch v {
	case 1:
		return canonicalV1
	case 2:
		return canonicalV2
	case 3:
		return canonicalV3
	}
	return nil
}

// mutableFields are entry fields _integrity never covers (AgentNode); the
// keyed seal covers them.
var mutableFields = []string{"installed_at", "last_trust_check", "trust_level", "source", "install_path",
	"install_mode", "capability_ids"}

var integrityFields = []string{FieldIntegrity}

var sealFields = []string{FieldSeal}

// Document is a parsed lockfile. Root is its top-level object, in file
// order; Parse has checked the types of every member agentnode reads.
type Document struct {
	Root *Value
}

// Parse parses a lockfile strictly: one JSON object without duplicate keys
// at any level, valid UTF-8 without lone surrogate escapes, nothing after
// it, and the members agentnode reads of the right JSON type
// (specs/lockfile.md). A lockfile_version other than Version parses; Verify
// reports it as unsupported. Errors wrap ErrInvalid and never contain
// content of the file.
func Parse(data []byte) (*Document, error) {
	root, err := ParseValue(data)
	if err != nil {
		return nil, err
	}
	d := &Document{Root: root}
	if err := d.check(); err != nil {
		return nil, err
	}
	return d, nil
}

// typeErr describes a member of the wrong type without its value.
func typeErr(where, field, want string, got *Value) error {
	return invalid("%s: %s must be %s, not %s", where, field, want, got.Kind)
}

// check enforces the JSON types of the members agentnode reads.
func (d *Document) check() error {
	r := d.Root
	if r.Kind != Object {
		return invalid("the top level must be an object, not %s", r.Kind)
	}
	lv := r.Get(FieldLockfileVersion)
	if lv == nil {
		return invalid("lockfile_version is missing")
	}
	if lv.Kind != String {
		return typeErr("the top level", FieldLockfileVersion, "a string", lv)
	}
	if u := r.Get(FieldUpdatedAt); u != nil && u.Kind != String && u.Kind != Null {
		return typeErr("the top level", FieldUpdatedAt, "a string", u)
	}
	pk := r.Get(FieldPackages)
	if pk == nil {
		return invalid("packages is missing")
	}
	if pk.Kind != Object {
		return typeErr("the top level", FieldPackages, "an object", pk)
	}
	for i, m := range pk.Obj {
		where := fmt.Sprintf("packages entry #%d", i+1)
		if m.Key == "" {
			return invalid("%s has an empty slug", where)
		}
		e := m.Value
		if e.Kind != Object {
			return invalid("%s must be an object, not %s", where, e.Kind)
		}
		for _, f := range []string{"version", "artifact_hash", "trust_level", "publisher_slug", FieldDepsHash} {
			if v := e.Get(f); v != nil && v.Kind != String && v.Kind != Null {
				return typeErr(where, f, "a string", v)
			}
		}
		if err := checkDigest(where, FieldIntegrity, e.Get(FieldIntegrity), "canonical_version"); err != nil {
			return err
		}
	}
	if err := checkDigest("the top level", FieldStructureDigest, r.Get(FieldStructureDigest), "canonicalization_version"); err != nil {
		return err
	}
	if s := r.Get(FieldSeal); s != nil {
		if s.Kind != Object {
			return typeErr("the top level", FieldSeal, "an object", s)
		}
		for _, f := range []string{"algorithm", "key_id", "hash"} {
			if v := s.Get(f); v != nil && v.Kind != String {
				return typeErr(FieldSeal, f, "a string", v)
			}
		}
	}
	return nil
}

// checkDigest checks an _integrity or structure_digest object: absent or
// null is allowed (status missing), else an object whose algorithm and hash
// are strings and whose version member is a number.
func checkDigest(where, field string, v *Value, versionField string) error {
	if v == nil || v.Kind == Null {
		return nil
	}
	if v.Kind != Object {
		return typeErr(where, field, "an object", v)
	}
	for _, f := range []string{"algorithm", "hash"} {
		if x := v.Get(f); x != nil && x.Kind != String {
			return typeErr(where, field+"."+f, "a string", x)
		}
	}
	if x := v.Get(versionField); x != nil && x.Kind != Number {
		return typeErr(where, field+"."+versionField, "a number", x)
	}
	return nil
}

// Packages returns the packages object.
func (d *Document) Packages() *Value { return d.Root.Get(FieldPackages) }

// Entry returns the entry of slug, or nil.
func (d *Document) Entry(slug string) *Value { return d.Packages().Get(slug) }

// stringField returns the string value of field in v, "" if absent, null
// or not a string.
func stringField(v *Value, field string) string {
	if x := v.Get(field); x != nil && x.Kind == String {
		return x.Str
	}
	return ""
}
