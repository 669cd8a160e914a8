package configedit

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agentnode/agentnode/kernel/config"
)

// schemaKey is a config key resolved against the schema.
type schemaKey struct {
	path []string       // object path into the document
	node map[string]any // resolved schema of the value
	// entry is true when the last path element names an entry of a map
	// (guard.tool_overrides.PKG/TOOL and the like).
	entry bool
}

// typeStringOrObject is the type of a key that takes a string or an object.
const typeStringOrObject = "string|object"

// typ is the JSON type the key takes: "string", "boolean", "integer",
// "number", "array", "object", or typeStringOrObject (a
// guard.tool_overrides entry).
func (k *schemaKey) typ() string {
	if t, ok := k.node["type"].(string); ok {
		return t
	}
	if ts, ok := k.node["type"].([]any); ok && len(ts) == 2 && ts[0] == "string" && ts[1] == "object" {
		return typeStringOrObject
	}
	if enum, ok := k.node["enum"].([]any); ok && len(enum) > 0 {
		if _, ok := enum[0].(string); ok {
			return "string"
		}
	}
	return ""
}

// allowed describes the values a key takes, for error messages.
func (k *schemaKey) allowed() string {
	if enum, ok := k.node["enum"].([]any); ok {
		vs := make([]string, 0, len(enum))
		for _, v := range enum {
			vs = append(vs, fmt.Sprint(v))
		}
		return "one of " + strings.Join(vs, ", ")
	}
	switch t := k.typ(); t {
	case "boolean":
		return "true or false"
	case "integer":
		return "an integer"
	case "number":
		return "a number"
	case "array":
		return "a JSON array"
	case "object":
		return "a JSON object"
	case typeStringOrObject:
		return "a string or a JSON object"
	case "string":
		if d, ok := k.node["description"].(string); ok && k.node["pattern"] != nil {
			return "a string (" + d + ")"
		}
		return "a string"
	default:
		return "a JSON value"
	}
}

// lookupKey resolves a dotted key. Keys name fixed properties; below a map
// (an object with additionalProperties) the next element names an entry, or,
// when entries are not objects, the rest of the key does (tool names may
// contain dots).
func lookupKey(key string) (*schemaKey, error) {
	if key == "" {
		return nil, unknownKey(key)
	}
	schema, err := config.SchemaDocument()
	if err != nil {
		return nil, err
	}
	segs := strings.Split(key, ".")
	node := schema
	var path []string
	entry := false
	for i := 0; i < len(segs); i++ {
		r := config.ResolveRef(schema, node)
		seg := segs[i]
		if seg == "" {
			return nil, unknownKey(key)
		}
		entry = false
		if props, ok := r["properties"].(map[string]any); ok {
			next, ok := props[seg].(map[string]any)
			if !ok {
				return nil, unknownKey(key)
			}
			node, path = next, append(path, seg)
			continue
		}
		ap, ok := r["additionalProperties"].(map[string]any)
		if !ok {
			return nil, unknownKey(key)
		}
		if _, objects := config.ResolveRef(schema, ap)["properties"]; !objects {
			seg = strings.Join(segs[i:], ".")
			i = len(segs)
		}
		node, path, entry = ap, append(path, seg), true
	}
	return &schemaKey{path: path, node: config.ResolveRef(schema, node), entry: entry}, nil
}

func unknownKey(key string) error {
	msg := fmt.Sprintf("unknown config key %q", key)
	if s := config.Suggest(key); len(s) > 0 {
		msg += " (did you mean " + strings.Join(s, " or ") + "?)"
	}
	return errors.New(msg)
}
