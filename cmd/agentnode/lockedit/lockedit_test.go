package lockedit

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentnode/agentnode/cmd/agentnode/pkginstall"
	"github.com/agentnode/agentnode/kernel/lockfile"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/specs"
)

// The tests of install's and remove's lockfile writes, and the helpers
// they share with kernel/lockfile's tests: the spec's sealed test vector
// (specs/lockfile.md) and its key.

const marker = "sk-live-SECRETMARKER42"

// vectorKey is the seal key of the test vector: bytes 0x00..0x1f.
func vectorKey() []byte {
	k := make([]byte, lockfile.KeySize)
	for i := range k {
		k[i] = byte(i)
	}
	return k
}

func keyOf(k []byte) lockfile.KeyFunc { return func() ([]byte, error) { return k, nil } }

// vectorDoc parses the lockfile of the spec's test vector: the fenced
// block after "<!-- vector: lockfile -->" in specs/lockfile.md.
func vectorDoc(t testing.TB) (*lockfile.Document, []byte) {
	t.Helper()
	spec, err := os.ReadFile(filepath.Join("..", "..", "..", "specs", "lockfile.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(spec, []byte("<!-- vector: lockfile -->\n```json\n"))
	data, _, ok2 := bytes.Cut(rest, []byte("\n```"))
	if !ok || !ok2 {
		t.Fatal("specs/lockfile.md has no lockfile vector block")
	}
	data = append(data, '\n')
	d, err := lockfile.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return d, data
}

func mustValue(t testing.TB, s string) *lockfile.Value {
	t.Helper()
	v, err := lockfile.ParseValue([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func entryStatus(r *lockfile.Report, slug string) lockfile.Status {
	for _, e := range r.Entries {
		if e.Slug == slug {
			return e.Status
		}
	}
	return ""
}

func assertAllVerified(t *testing.T, r *lockfile.Report) {
	t.Helper()
	if p, w := Problems(r, true); len(p)+len(w) > 0 {
		t.Errorf("problems %q, warnings %q", p, w)
	}
}

// sealedDoc is a document with entry e (its _integrity computed) sealed
// with the vector key.
func sealedDoc(t *testing.T, e *lockfile.Value) *lockfile.Document {
	t.Helper()
	e.Set(lockfile.FieldIntegrity, Integrity(e))
	d := New()
	d.Packages().Set("pkg-one", e)
	d.Root.Set(lockfile.FieldStructureDigest, StructureDigest(d))
	Seal(d, vectorKey())
	assertAllVerified(t, d.Verify(keyOf(vectorKey())))
	return d
}

// sdkLockfile is an agentnode.lock as the AgentNode SDK writes it, the
// fixture of kernel/lockfile's permission tests.
func sdkLockfile(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "kernel", "lockfile", "testdata", "sdk.lock"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func validateSchema(t *testing.T, data []byte) {
	t.Helper()
	raw, err := fs.ReadFile(specs.Schemas, "schema/agentnode-lock.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	sdoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem:///lock.json", sdoc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem:///lock.json")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("schema: %v\n%s", err, data)
	}
}

const testManifest = `manifest_version: "0.2"
package_id: demo-tools
package_type: toolpack
name: Demo
publisher: acme
version: 1.4.0
summary: Demo tools.
runtime: exec
capabilities:
  tools:
    - name: echo
      description: "Echo <b>\u00e9</b>"
      entrypoint: bin/echo
      action_type: read
      input_schema: {type: object, properties: {ratio: {type: number, maximum: 1.5}}}
    - name: env
      description: Env.
      entrypoint: bin/echo
      input_schema: {type: object}
permissions:
  network: {level: none}
  filesystem: {level: temp}
  code_execution: {level: none}
`

func installDemo(t *testing.T) *store.Package {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "agentnode.yaml"), []byte(testManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(src, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "bin", "echo"), []byte("#!/bin/sh\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := pkginstall.Open(filepath.Join(t.TempDir(), "packages")).Install(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEntryFor(t *testing.T) {
	p := installDemo(t)
	e, err := EntryFor(p, EntryInfo{TrustLevel: "unknown", Source: SourceLocal})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"version": "1.4.0", "package_type": "toolpack", "runtime": "exec", "entrypoint": "bin/echo",
		"artifact_hash": p.ArtifactHash, "publisher_slug": "acme", "trust_level": "unknown", "source": "local",
		"install_path": p.Dir,
	}
	for k, v := range want {
		if got := stringField(e, k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if e.Get("installed_at") == nil || e.Get(lockfile.FieldIntegrity) != nil || e.Get("last_trust_check") != nil {
		t.Errorf("entry %s", lockfile.Indented(e))
	}
	tools := e.Get("tools")
	if tools == nil || len(tools.Arr) != 2 || stringField(tools.Arr[0], "name") != "echo" {
		t.Fatalf("tools %s", lockfile.Indented(tools))
	}
	if max := tools.Arr[0].Get("input_schema").Get("properties").Get("ratio").Get("maximum"); max == nil || max.Str != "1.5" {
		t.Fatalf("input_schema numbers not kept: %s", lockfile.Indented(tools.Arr[0]))
	}
	// permissions in the flat form the AgentNode SDK reads, all five levels.
	if got, want := string(lockfile.Canonical(e.Get("permissions"))), `{"code_execution_level":"none","data_access_level":"input_only","filesystem_level":"temp","network_level":"none","user_approval_level":"never"}`; got != want {
		t.Fatalf("permissions = %s, want %s", got, want)
	}
	if perms, shape, ok, err := EntryPermissions(e); err != nil || !ok || shape != ShapeFlat || perms.Filesystem != "temp" {
		t.Fatalf("EntryPermissions = %+v, %s, %v, %v", perms, shape, ok, err)
	}
	if SelectCanonicalVersion(e) != 3 {
		t.Fatal("install entries are canonical_version 3")
	}
	// Into a lockfile, and the result is valid by the JSON Schema.
	path := filepath.Join(t.TempDir(), "agentnode.lock")
	if err := (&Updater{Path: path}).Put(p.ID, e); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	validateSchema(t, data)
	d, _ := lockfile.Parse(data)
	r := d.Verify(nil)
	if entryStatus(r, p.ID) != lockfile.Verified || r.Structure.Status != lockfile.Verified {
		t.Fatalf("%+v", r)
	}
}

func TestUpdaterPutRemove(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agentnode.lock")
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	u := &Updater{Path: path, LockPath: filepath.Join(dir, "l.lock"), Key: keyOf(vectorKey()), Now: func() time.Time { return now }}

	// No lockfile: Put creates one, unsealed, everything verified.
	e := mustValue(t, `{"version":"1.0.0","package_type":"toolpack","publisher_slug":"acme","trust_level":"unknown"}`)
	if err := u.Put("one-pack", e); err != nil {
		t.Fatal(err)
	}
	d, err := lockfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	r := d.Verify(nil)
	if entryStatus(r, "one-pack") != lockfile.Verified || r.Structure.Status != lockfile.Verified || r.Seal.Status != lockfile.Missing {
		t.Fatalf("after first put: %+v", r)
	}
	if got := stringField(d.Root, lockfile.FieldUpdatedAt); got != "2026-01-02T03:04:05Z" {
		t.Fatalf("updated_at %q", got)
	}

	// Start from the sealed vector: another entry is added, the existing
	// ones keep their exact text, and the file is re-sealed.
	_, data := vectorDoc(t)
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := u.Put("one-pack", e); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	d, err = lockfile.Parse(after)
	if err != nil {
		t.Fatal(err)
	}
	assertAllVerified(t, d.Verify(keyOf(vectorKey())))
	orig, _ := lockfile.Parse(data)
	for _, slug := range []string{"hello-tools", "legacy-pack"} {
		if !bytes.Equal(lockfile.Indented(orig.Entry(slug)), lockfile.Indented(d.Entry(slug))) {
			t.Errorf("entry %s changed", slug)
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 kept", fi.Mode().Perm())
	}
	if SelectCanonicalVersion(d.Entry("one-pack")) != 3 || entryStatus(d.Verify(nil), "one-pack") != lockfile.Verified {
		t.Error("new entry not sealed at V3")
	}
	// A re-install keeps a trust_level cap the entry had.
	d.Entry("one-pack").Set("trust_level", lockfile.Str("unverified"))
	d.Root.Delete(lockfile.FieldSeal)
	Seal(d, vectorKey())
	if err := WriteFile(path, d); err != nil {
		t.Fatal(err)
	}
	if err := u.Put("one-pack", mustValue(t, `{"version":"1.0.1","publisher_slug":"acme"}`)); err != nil {
		t.Fatal(err)
	}
	d, _ = lockfile.Load(path)
	if got := stringField(d.Entry("one-pack"), "trust_level"); got != "unverified" || stringField(d.Entry("one-pack"), "version") != "1.0.1" {
		t.Fatalf("re-install: trust_level %q, entry %s", got, lockfile.Indented(d.Entry("one-pack")))
	}
	// Replacing an entry whose _integrity was tampered with is allowed.
	d.Entry("one-pack").Set("version", lockfile.Str("6.6.6"))
	d.Root.Delete(lockfile.FieldSeal)
	Seal(d, vectorKey())
	if err := WriteFile(path, d); err != nil {
		t.Fatal(err)
	}
	if err := u.Put("one-pack", e); err != nil {
		t.Fatalf("replacing a mismatching entry: %v", err)
	}

	// Remove drops it and re-seals; removing an absent slug writes nothing.
	if err := u.Remove("one-pack"); err != nil {
		t.Fatal(err)
	}
	d, _ = lockfile.Load(path)
	if d.Entry("one-pack") != nil {
		t.Fatal("entry not removed")
	}
	assertAllVerified(t, d.Verify(keyOf(vectorKey())))
	before, _ := os.ReadFile(path)
	if err := u.Remove("never-there"); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(before, again) {
		t.Fatal("removing an absent entry rewrote the lockfile")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Fatalf("temporary file left: %s", e.Name())
		}
	}
}

// Before anything changes, an update refuses a lockfile it cannot
// account for; the file stays byte for byte as it was.
func TestUpdaterRefusesBeforeChanging(t *testing.T) {
	_, data := vectorDoc(t)
	e := mustValue(t, `{"version":"1.0.0"}`)
	cases := []struct {
		name   string
		key    lockfile.KeyFunc
		mutate func(d *lockfile.Document)
		raw    []byte
		want   string
	}{
		{"seal key unreadable", func() ([]byte, error) { return nil, errors.New("keychain locked") }, nil, nil, "seal key cannot be read"},
		{"another entry tampered", keyOf(vectorKey()), func(d *lockfile.Document) { d.Entry("legacy-pack").Set("version", lockfile.Str("6.6.6")) }, nil, "does not verify"},
		{"seal broken", keyOf(vectorKey()), func(d *lockfile.Document) { d.Entry("legacy-pack").Set("trust_level", lockfile.Str("curated")) }, nil, "seal: mismatch"},
		{"structure broken", keyOf(vectorKey()), func(d *lockfile.Document) {
			d.Root.Delete(lockfile.FieldSeal)
			d.Root.Get(lockfile.FieldStructureDigest).Set("hash", lockfile.Str(strings.Repeat("0", 64)))
		}, nil, "structure_digest: mismatch"},
		{"unsupported version", keyOf(vectorKey()), func(d *lockfile.Document) {
			d.Root.Delete(lockfile.FieldSeal)
			d.Root.Set(lockfile.FieldLockfileVersion, lockfile.Str("0.2"))
		}, nil, "unsupported"},
		{"corrupt", keyOf(vectorKey()), nil, []byte(`{"packages":` + marker), "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "agentnode.lock")
			content := data
			if c.mutate != nil {
				d, _ := lockfile.Parse(data)
				c.mutate(d)
				content = Marshal(d)
			}
			if c.raw != nil {
				content = c.raw
			}
			if err := os.WriteFile(path, content, 0o644); err != nil {
				t.Fatal(err)
			}
			u := &Updater{Path: path, Key: c.key}
			err := u.Check("one-pack")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("check: %v, want %q", err, c.want)
			}
			if err := u.Put("one-pack", e); err == nil {
				t.Fatal("put succeeded")
			}
			if err := u.Remove("hello-tools"); err == nil {
				t.Fatal("remove succeeded")
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, content) {
				t.Fatal("the lockfile changed")
			}
		})
	}
}

// deps_hash (the dependencies agentnode installed into a package) is
// written by EntryFor, outside _integrity (AgentNode's canonical fields):
// only the keyed seal catches a change, even with _integrity and the
// structure_digest recomputed.
func TestDepsHashOnlyBreaksTheSeal(t *testing.T) {
	p := installDemo(t)
	p.DepsHash = "sha256:" + strings.Repeat("12", 32)
	e, err := EntryFor(p, EntryInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if got := stringField(e, lockfile.FieldDepsHash); got != p.DepsHash {
		t.Fatalf("entry deps_hash %q, want %q", got, p.DepsHash)
	}
	d := sealedDoc(t, e)
	e = d.Entry("pkg-one")
	e.Set(lockfile.FieldDepsHash, lockfile.Str("sha256:"+strings.Repeat("34", 32)))
	e.Set(lockfile.FieldIntegrity, Integrity(e))
	d.Root.Set(lockfile.FieldStructureDigest, StructureDigest(d))
	r := d.Verify(keyOf(vectorKey()))
	if entryStatus(r, "pkg-one") != lockfile.Verified || r.Structure.Status != lockfile.Verified {
		t.Fatalf("integrity/structure: %s/%s", entryStatus(r, "pkg-one"), r.Structure.Status)
	}
	if r.Seal.Status != lockfile.Mismatch {
		t.Fatalf("seal %s after changing deps_hash", r.Seal.Status)
	}
	// Without dependencies there is no deps_hash.
	p.DepsHash = ""
	if e, _ := EntryFor(p, EntryInfo{}); e.Get(lockfile.FieldDepsHash) != nil {
		t.Fatal("deps_hash written for a package without dependencies")
	}
	// A deps_hash that is not a string does not parse.
	if _, err := lockfile.Parse([]byte(`{"lockfile_version":"0.1","packages":{"a-b":{"deps_hash":1}}}`)); err == nil {
		t.Fatal("a numeric deps_hash parsed")
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
	d, err := lockfile.Parse(sdkLockfile(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range d.Packages().Obj {
		m.Value.Set(lockfile.FieldIntegrity, Integrity(m.Value))
	}
	d.Root.Set("structure_digest", StructureDigest(d))
	Seal(d, vectorKey())
	if err := os.WriteFile(path, Marshal(d), 0o600); err != nil {
		t.Fatal(err)
	}
	before := lockfile.Indented(d.Entry("word-counter-pack"))
	p := installDemo(t)
	e, err := EntryFor(p, EntryInfo{Source: SourceLocal})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Updater{Path: path, LockPath: filepath.Join(dir, "l.lock"), Key: keyOf(vectorKey())}).Put(p.ID, e); err != nil {
		t.Fatal(err)
	}
	d, err = lockfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := lockfile.Indented(d.Entry("word-counter-pack")); !bytes.Equal([]byte(got), []byte(before)) {
		t.Errorf("SDK entry changed:\n%s\nwas\n%s", got, before)
	}
	if _, shape, _, err := EntryPermissions(d.Entry(p.ID)); err != nil || shape != ShapeFlat {
		t.Errorf("new entry: %s, %v", shape, err)
	}
	r := d.Verify(keyOf(vectorKey()))
	if r.Seal.Status != lockfile.Verified || r.Structure.Status != lockfile.Verified {
		t.Fatalf("seal %s, structure %s", r.Seal.Status, r.Structure.Status)
	}
	for _, slug := range []string{"word-counter-pack", "web-fetch-pack", p.ID} {
		if entryStatus(r, slug) != lockfile.Verified {
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
	d, err = lockfile.Parse(tampered)
	if err != nil {
		t.Fatal(err)
	}
	r = d.Verify(keyOf(vectorKey()))
	if r.Seal.Status != lockfile.Mismatch || r.Counts()[lockfile.Mismatch] != 1 {
		t.Errorf("tampered: seal %s, %v", r.Seal.Status, r.Counts())
	}
}

const mcpManifest = `manifest_version: "0.2"
package_id: demo-mcp
package_type: mcp_server
name: Demo MCP
publisher: acme
version: 2.0.0
summary: A preinstalled MCP server.
runtime: mcp
mcp_server:
  command: [/pack/bin/server, --stdio]
  env_keys: [DEMO_TOKEN]
  install: {manager: npm, package: "@acme/demo-mcp", version: 1.2.3}
capabilities:
  tools:
    - {name: echo, description: Echo., entrypoint: echo, input_schema: {type: object}}
permissions:
  network: {level: none}
  filesystem: {level: none}
  code_execution: {level: none}
`

// An MCP server's entry seals the preinstall: the pin, the installed tree's
// hash and the command, all covered by _integrity.
func TestEntryForMCPServer(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "agentnode.yaml"), []byte(mcpManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "bin", "server"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := pkginstall.Open(filepath.Join(t.TempDir(), "packages")).Install(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := EntryFor(p, EntryInfo{Source: SourceLocal})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"mcp_preinstalled":       `true`,
		"mcp_preinstall":         `{"artifact_hash":"` + p.ArtifactHash + `","manager":"npm","package":"@acme/demo-mcp","version":"1.2.3"}`,
		"mcp_preinstall_command": `["/pack/bin/server","--stdio"]`,
		"mcp_command":            `["/pack/bin/server","--stdio"]`,
		"mcp_env_keys":           `["DEMO_TOKEN"]`,
	}
	for k, w := range want {
		v := e.Get(k)
		if v == nil {
			t.Errorf("%s missing", k)
			continue
		}
		if got := string(lockfile.Canonical(v)); got != w {
			t.Errorf("%s = %s, want %s", k, got, w)
		}
	}
	if e.Get("mcp_sandbox_volume") != nil || e.Get("mcp_allowed_domains") != nil {
		t.Errorf("unexpected fields in %s", lockfile.Canonical(e))
	}
	// Every preinstall field is hashed.
	c := string(lockfile.Canonical(lockfile.CanonicalEntry(e, SelectCanonicalVersion(e))))
	for _, k := range []string{"mcp_preinstalled", "mcp_preinstall", "mcp_preinstall_command"} {
		if !strings.Contains(c, `"`+k+`":`) {
			t.Errorf("%s is not in the hashed fields: %s", k, c)
		}
	}
}
