package lockedit

import (
	"errors"
	"testing"

	"github.com/agentnode/agentnode/kernel/lockfile"
)

func TestEntryPermissionsBothShapes(t *testing.T) {
	d, err := lockfile.Parse(sdkLockfile(t))
	if err != nil {
		t.Fatal(err)
	}
	p, shape, ok, err := EntryPermissions(d.Entry("word-counter-pack"))
	if err != nil || !ok || shape != ShapeFlat {
		t.Fatalf("flat: %+v %s %v %v", p, shape, ok, err)
	}
	if p != (Permissions{"none", "none", "none", "input_only", "never"}) {
		t.Errorf("flat = %+v", p)
	}
	p, shape, ok, err = EntryPermissions(d.Entry("web-fetch-pack"))
	if err != nil || !ok || shape != ShapeNested {
		t.Fatalf("nested: %+v %s %v %v", p, shape, ok, err)
	}
	if p != (Permissions{"restricted", "temp", "none", "input_only", "never"}) {
		t.Errorf("nested = %+v", p)
	}

	for name, perms := range map[string]string{
		"mixed":            `{"network_level": "none", "filesystem": {"level": "temp"}}`,
		"level not string": `{"network_level": 1}`,
		"nested no level":  `{"network": {"allowed_domains": []}}`,
		"unknown member":   `{"network_level": "none", "gpu_level": "all"}`,
		"not an object":    `"none"`,
	} {
		e, err := lockfile.ParseValue([]byte(`{"permissions": ` + perms + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := EntryPermissions(e); !errors.Is(err, ErrPermissionsShape) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	for _, perms := range []string{`null`, ``} {
		doc := `{}`
		if perms != "" {
			doc = `{"permissions": null}`
		}
		e, _ := lockfile.ParseValue([]byte(doc))
		if _, _, ok, err := EntryPermissions(e); ok || err != nil {
			t.Errorf("%s: present %v, %v", doc, ok, err)
		}
	}
	// Absent levels take the registry's defaults, as the SDK reads them.
	e, _ := lockfile.ParseValue([]byte(`{"permissions": {"network_level": "unrestricted"}}`))
	if p, _, _, err := EntryPermissions(e); err != nil || p != (Permissions{"unrestricted", "none", "none", "input_only", "never"}) {
		t.Errorf("partial flat = %+v, %v", p, err)
	}
}
