package lockfile_test

// The seal key tests use a real OS keychain: run them with
//
//	AGENTNODE_REQUIRE_KEYRING=1 test/keyring.sh go test ./kernel/lockfile/
//
// Without one they skip, unless AGENTNODE_REQUIRE_KEYRING=1.

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/lockedit"
	. "github.com/agentnode/agentnode/kernel/lockfile"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentnode/agentnode/specs"
)

func validateSchema(t *testing.T, data []byte, valid bool) {
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
	err = sch.Validate(inst)
	if valid && err != nil {
		t.Fatalf("schema: %v\n%s", err, data)
	}
	if !valid && err == nil {
		t.Fatalf("schema accepted\n%s", data)
	}
}

func TestSchema(t *testing.T) {
	_, data := vectorDoc(t)
	validateSchema(t, data, true)
	for _, bad := range []string{
		`{"packages":{}}`,
		`{"lockfile_version":"0.1","packages":{"a":{"version":1}}}`,
		`{"lockfile_version":"0.1","packages":{"a":{"_integrity":{"algorithm":"sha256","canonical_version":4,"hash":"` + strings.Repeat("0", 64) + `"}}}}`,
		`{"lockfile_version":"0.1","packages":{},"_agentnode_seal":{"algorithm":"hmac-sha256","key_id":"x","hash":"y"}}`,
	} {
		validateSchema(t, []byte(bad), false)
	}
}

// bigLockfile is a sealed lockfile of n install-like entries.
func bigLockfile(b testing.TB, n int) []byte {
	b.Helper()
	d := lockedit.New()
	for i := range n {
		e := mustValue(b, fmt.Sprintf(`{"version":"1.%d.0","package_type":"toolpack","runtime":"exec","entrypoint":"bin/tool",
"artifact_hash":"sha256:%064x","publisher_slug":"publisher-%d",
"tools":[{"name":"search","description":"Search things","entrypoint":"bin/tool","action_type":"read","input_schema":{"type":"object","properties":{"q":{"type":"string","maxLength":200},"limit":{"type":"integer","maximum":100}},"required":["q"]}},
{"name":"fetch","description":"Fetch a thing","entrypoint":"bin/tool","input_schema":{"type":"object"}}],
"permissions":{"network":{"level":"restricted","allowed_domains":["api.example.com"]},"filesystem":{"level":"none"},"code_execution":{"level":"none"}},
"installed_at":"2026-01-02T03:04:05Z","trust_level":"verified","source":"local","install_path":"/home/u/.agentnode/packages/pkg-%d/content"}`, i, i, i, i))
		e.Set(FieldIntegrity, lockedit.Integrity(e))
		d.Packages().Set(fmt.Sprintf("pkg-%05d", i), e)
	}
	d.Root.Set(FieldStructureDigest, lockedit.StructureDigest(d))
	lockedit.Seal(d, vectorKey())
	return lockedit.Marshal(d)
}

// BenchmarkVerify1000 is `lock verify` of a 1,000-entry lockfile minus the
// keychain read: parse (strict, duplicate keys), every _integrity, the
// structure digest and the seal.
func BenchmarkVerify1000(b *testing.B) {
	data := bigLockfile(b, 1000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		d, err := Parse(data)
		if err != nil {
			b.Fatal(err)
		}
		r := d.Verify(keyOf(vectorKey()))
		if r.Seal.Status != Verified || r.Structure.Status != Verified {
			b.Fatal(r.Seal, r.Structure)
		}
	}
}

// BenchmarkRawBaseline1000 is the raw thing Verify wraps: encoding/json
// into interface values plus one SHA-256 over the file.
func BenchmarkRawBaseline1000(b *testing.B) {
	data := bigLockfile(b, 1000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			b.Fatal(err)
		}
		_ = sha256.Sum256(data)
	}
}
