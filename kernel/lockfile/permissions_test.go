package lockfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// sdkLockfile is an agentnode.lock as the AgentNode SDK writes it
// (json.dumps indent=2): an entry with the flat permissions of its install
// metadata and the SDK's other fields (capability_ids, prompts, resources,
// connector, agent, install_mode, _integrity over its canonical fields),
// and an entry agentnode wrote before, with the manifest's nested form.
const sdkLockfile = `{
  "lockfile_version": "0.1",
  "updated_at": "2026-06-03T12:00:00.000001+00:00",
  "packages": {
    "word-counter-pack": {
      "version": "1.2.0",
      "package_type": "toolpack",
      "runtime": "python",
      "entrypoint": "word_counter_pack.tool",
      "capability_ids": [
        "text_analysis"
      ],
      "tools": [
        {
          "name": "count_words",
          "entrypoint": "word_counter_pack.tool:count_words"
        }
      ],
      "artifact_hash": "sha256:4f1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c",
      "installed_at": "2026-06-03T12:00:00.000001+00:00",
      "source": "sdk",
      "trust_level": "verified",
      "permissions": {
        "network_level": "none",
        "filesystem_level": "none",
        "code_execution_level": "none",
        "data_access_level": "input_only",
        "user_approval_level": "never"
      },
      "prompts": [],
      "resources": [],
      "connector": null,
      "agent": null,
      "install_mode": "package"
    },
    "web-fetch-pack": {
      "version": "0.3.0",
      "package_type": "toolpack",
      "runtime": "exec",
      "entrypoint": "bin/fetch",
      "artifact_hash": "sha256:0000000000000000000000000000000000000000000000000000000000000002",
      "permissions": {
        "network": {
          "level": "restricted",
          "allowed_domains": [
            "example.org"
          ]
        },
        "filesystem": {
          "level": "temp"
        },
        "code_execution": {
          "level": "none"
        }
      },
      "source": "local"
    }
  }
}
`

func TestEntryPermissionsBothShapes(t *testing.T) {
	d, err := Parse([]byte(sdkLockfile))
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
		e, err := ParseValue([]byte(`{"permissions": ` + perms + `}`))
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
		e, _ := ParseValue([]byte(doc))
		if _, _, ok, err := EntryPermissions(e); ok || err != nil {
			t.Errorf("%s: present %v, %v", doc, ok, err)
		}
	}
	// Absent levels take the registry's defaults, as the SDK reads them.
	e, _ := ParseValue([]byte(`{"permissions": {"network_level": "unrestricted"}}`))
	if p, _, _, err := EntryPermissions(e); err != nil || p != (Permissions{"unrestricted", "none", "none", "input_only", "never"}) {
		t.Errorf("partial flat = %+v, %v", p, err)
	}
}

// TestUpdateKeepsSDKEntries: agentnode's install into a lockfile the SDK
// wrote keeps every other entry, the SDK's fields and numbers included,
// byte for byte, writes its own entry flat, and the seal covers it all.
func TestUpdateKeepsSDKEntries(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agentnode.lock")
	// The SDK's lockfile as it is, given _integrity, structure_digest and
	// the seal (what lock seal --force does).
	d, err := Parse([]byte(sdkLockfile))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range d.Packages().Obj {
		m.Value.Set(FieldIntegrity, Integrity(m.Value))
	}
	d.Root.Set("structure_digest", StructureDigest(d))
	d.Seal(vectorKey())
	if err := os.WriteFile(path, d.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	before := Indented(d.Entry("word-counter-pack"))
	p := installDemo(t)
	e, err := EntryFor(p, EntryInfo{Source: SourceLocal})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Updater{Path: path, LockPath: filepath.Join(dir, "l.lock"), Key: keyOf(vectorKey())}).Put(p.ID, e); err != nil {
		t.Fatal(err)
	}
	d, err = Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := Indented(d.Entry("word-counter-pack")); !bytes.Equal([]byte(got), []byte(before)) {
		t.Errorf("SDK entry changed:\n%s\nwas\n%s", got, before)
	}
	if _, shape, _, err := EntryPermissions(d.Entry(p.ID)); err != nil || shape != ShapeFlat {
		t.Errorf("new entry: %s, %v", shape, err)
	}
	r := d.Verify(keyOf(vectorKey()))
	if r.Seal.Status != Verified || r.Structure.Status != Verified {
		t.Fatalf("seal %s, structure %s", r.Seal.Status, r.Structure.Status)
	}
	for _, slug := range []string{"word-counter-pack", "web-fetch-pack", p.ID} {
		if entryStatus(r, slug) != Verified {
			t.Errorf("%s: %s", slug, entryStatus(r, slug))
		}
	}
	// Changing a flat level breaks the entry's _integrity and the seal.
	data, _ := os.ReadFile(path)
	tampered := bytes.Replace(data, []byte(`"network_level": "none",
        "filesystem_level": "none"`), []byte(`"network_level": "unrestricted",
        "filesystem_level": "none"`), 1)
	if bytes.Equal(tampered, data) {
		t.Fatal("no flat permissions to tamper with")
	}
	d, err = Parse(tampered)
	if err != nil {
		t.Fatal(err)
	}
	r = d.Verify(keyOf(vectorKey()))
	if r.Seal.Status != Mismatch || r.Counts()[Mismatch] != 1 {
		t.Errorf("tampered: seal %s, %v", r.Seal.Status, r.Counts())
	}
}
