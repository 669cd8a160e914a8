package lockedit

import (
	"errors"

	"github.com/agentnode/agentnode/kernel/lockfile"
)

// An entry's permissions come in two shapes. The AgentNode SDK writes and
// reads them flat, as its registry's install metadata has them:
//
//	"permissions": {"network_level": "none", "filesystem_level": "temp",
//	  "code_execution_level": "none", "data_access_level": "input_only",
//	  "user_approval_level": "never"}
//
// agentnode before this version wrote the manifest's nested form:
//
//	"permissions": {"network": {"level": "none", "allowed_domains": [...]},
//	  "filesystem": {"level": "temp"}, "code_execution": {"level": "none"}}
//
// FlatPermissions makes the flat form (the one both read; install writes
// it); EntryPermissions reads either. The levels are the manifest's in
// both. A run never reads an entry's permissions from the lockfile (the
// installed manifest, which artifact_hash pins, is what a decision reads),
// so both live with the writer, not in kernel/lockfile.

// Shapes of an entry's permissions.
const (
	ShapeFlat   = "flat"
	ShapeNested = "nested"
)

// Permissions are the levels an entry records.
type Permissions struct {
	Network, Filesystem, CodeExecution string
	DataAccess, UserApproval           string // "" when not recorded
}

// What the AgentNode registry records for a permission the manifest leaves
// out, and so the SDK's flat form has.
const (
	defaultLevel        = "none"
	defaultDataAccess   = "input_only"
	defaultUserApproval = "never"
)

// ErrPermissionsShape: an entry's permissions are neither shape.
var ErrPermissionsShape = errors.New("lockfile entry: permissions are neither the flat (network_level, ...) nor the nested (network.level, ...) form")

// EntryPermissions reads an entry's permissions in either shape. present
// is false when the entry has none (absent or null). A level that is
// absent takes the registry's default (none, input_only, never), as the
// SDK reads it. Anything else — a shape mixing both forms, a level that is
// not a string, a member of neither form — is ErrPermissionsShape: the
// caller fails closed. Errors never quote the file.
func EntryPermissions(entry *lockfile.Value) (p Permissions, shape string, present bool, err error) {
	v := entry.Get("permissions")
	if v == nil || v.Kind == lockfile.Null {
		return Permissions{}, "", false, nil
	}
	if v.Kind != lockfile.Object {
		return Permissions{}, "", true, ErrPermissionsShape
	}
	flat := map[string]*string{
		"network_level": &p.Network, "filesystem_level": &p.Filesystem, "code_execution_level": &p.CodeExecution,
		"data_access_level": &p.DataAccess, "user_approval_level": &p.UserApproval,
	}
	nested := map[string]*string{
		"network": &p.Network, "filesystem": &p.Filesystem, "code_execution": &p.CodeExecution,
		"data_access": &p.DataAccess, "user_approval": &p.UserApproval,
	}
	for _, m := range v.Obj {
		switch {
		case flat[m.Key] != nil && shape != ShapeNested:
			shape = ShapeFlat
			if m.Value.Kind != lockfile.String {
				return Permissions{}, "", true, ErrPermissionsShape
			}
			*flat[m.Key] = m.Value.Str
		case nested[m.Key] != nil && shape != ShapeFlat:
			shape = ShapeNested
			field := "level"
			if m.Key == "user_approval" {
				field = "required"
			}
			l := m.Value.Get(field)
			if m.Value.Kind != lockfile.Object || l == nil || l.Kind != lockfile.String {
				return Permissions{}, "", true, ErrPermissionsShape
			}
			*nested[m.Key] = l.Str
		case m.Key == "external_integrations" && shape != ShapeFlat:
			shape = ShapeNested // the manifest's free-form list
		default:
			return Permissions{}, "", true, ErrPermissionsShape
		}
	}
	if shape == "" {
		shape = ShapeFlat // {}: nothing declared
	}
	for _, f := range []*string{&p.Network, &p.Filesystem, &p.CodeExecution} {
		if *f == "" {
			*f = defaultLevel
		}
	}
	if p.DataAccess == "" {
		p.DataAccess = defaultDataAccess
	}
	if p.UserApproval == "" {
		p.UserApproval = defaultUserApproval
	}
	return p, shape, true, nil
}

// FlatPermissions converts a manifest's permissions (nested) to the flat
// form the AgentNode SDK writes and reads, with all five levels (absent
// ones take the registry's defaults). nil for a manifest without
// permissions.
func FlatPermissions(manifestPerms *lockfile.Value) *lockfile.Value {
	if manifestPerms == nil || manifestPerms.Kind != lockfile.Object {
		return nil
	}
	level := func(key, field, def string) *lockfile.Value {
		if s := manifestPerms.Get(key).Get(field); s != nil && s.Kind == lockfile.String && s.Str != "" {
			return lockfile.Str(s.Str)
		}
		return lockfile.Str(def)
	}
	return lockfile.Obj(
		lockfile.Member{Key: "network_level", Value: level("network", "level", defaultLevel)},
		lockfile.Member{Key: "filesystem_level", Value: level("filesystem", "level", defaultLevel)},
		lockfile.Member{Key: "code_execution_level", Value: level("code_execution", "level", defaultLevel)},
		lockfile.Member{Key: "data_access_level", Value: level("data_access", "level", defaultDataAccess)},
		lockfile.Member{Key: "user_approval_level", Value: level("user_approval", "required", defaultUserApproval)},
	)
}
