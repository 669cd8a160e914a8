package lockfile

import "errors"

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
// it, cmd/agentnode/lockedit); EntryPermissions reads either. The levels
// are the manifest's in both.

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
func EntryPermissions(entry *Value) (p Permissions, shape string, present bool, err error) {
	v := entry.Get("permissions")
	if v == nil || v.Kind == Null {
		return Permissions{}, "", false, nil
	}
	if v.Kind != Object {
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
			if m.Value.Kind != String {
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
			if m.Value.Kind != Object || l == nil || l.Kind != String {
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
func FlatPermissions(manifestPerms *Value) *Value {
	if manifestPerms == nil || manifestPerms.Kind != Object {
		return nil
	}
	level := func(key, field, def string) *Value {
		if s := stringField(manifestPerms.Get(key), field); s != "" {
			return Str(s)
		}
		return Str(def)
	}
	return Obj(
		Member{"network_level", level("network", "level", defaultLevel)},
		Member{"filesystem_level", level("filesystem", "level", defaultLevel)},
		Member{"code_execution_level", level("code_execution", "level", defaultLevel)},
		Member{"data_access_level", level("data_access", "level", defaultDataAccess)},
		Member{"user_approval_level", level("user_approval", "required", defaultUserApproval)},
	)
}
