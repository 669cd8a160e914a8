package lockfile

// The seal key tests use a real OS keychain: run them with
//
//	AGENTNODE_REQUIRE_KEYRING=1 test/keyring.sh go test ./kernel/lockfile/
//
// Without one they skip, unless AGENTNODE_REQUIRE_KEYRING=1.

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentnode/agentnode/kernel/keychain"
	"github.com/agentnode/agentnode/kernel/keychain/keychaintest"
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

func requireKeyring(t *testing.T) { keychaintest.Require(t) }

func TestSealKeyInKeychain(t *testing.T) {
	requireKeyring(t)
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	saved := keychainService
	keychainService = "agentnode-lock-seal-test-" + hex.EncodeToString(b)
	scope, _ := keyCacheScope()
	t.Cleanup(func() {
		_ = keychain.Delete(keychainService, KeychainUser)
		forgetCachedKeys(scope, "")
		keychainService = saved
	})
	if _, err := LoadKey(); !errors.Is(err, keychain.ErrNotFound) {
		t.Fatalf("no key yet: %v", err)
	}
	k1, err := LoadOrCreateKey()
	if err != nil || len(k1) != KeySize {
		t.Fatalf("create: %v (%d bytes)", err, len(k1))
	}
	k2, err := LoadKey()
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("load: %v", err)
	}
	k3, err := LoadOrCreateKey()
	if err != nil || !bytes.Equal(k1, k3) {
		t.Fatalf("second LoadOrCreateKey made a new key: %v", err)
	}
	// A corrupted secret is refused without repeating it.
	if err := keychain.Set(keychainService, KeychainUser, marker); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(); err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("corrupt key: %v", err)
	}
	if _, err := LoadOrCreateKey(); err == nil {
		t.Fatal("a corrupt key was replaced")
	}
}

// bigLockfile is a sealed lockfile of n install-like entries.
func bigLockfile(b testing.TB, n int) []byte {
	b.Helper()
	d := New()
	for i := range n {
		e := mustValue(b, fmt.Sprintf(`{"version":"1.%d.0","package_type":"toolpack","runtime":"exec","entrypoint":"bin/tool",
"artifact_hash":"sha256:%064x","publisher_slug":"publisher-%d",
"tools":[{"name":"search","description":"Search things","entrypoint":"bin/tool","action_type":"read","input_schema":{"type":"object","properties":{"q":{"type":"string","maxLength":200},"limit":{"type":"integer","maximum":100}},"required":["q"]}},
{"name":"fetch","description":"Fetch a thing","entrypoint":"bin/tool","input_schema":{"type":"object"}}],
"permissions":{"network":{"level":"restricted","allowed_domains":["api.example.com"]},"filesystem":{"level":"none"},"code_execution":{"level":"none"}},
"installed_at":"2026-01-02T03:04:05Z","trust_level":"verified","source":"local","install_path":"/home/u/.agentnode/packages/pkg-%d/content"}`, i, i, i, i))
		e.Set(FieldIntegrity, Integrity(e))
		d.Packages().Set(fmt.Sprintf("pkg-%05d", i), e)
	}
	d.Root.Set(FieldStructureDigest, StructureDigest(d))
	d.Seal(vectorKey())
	return d.Marshal()
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
