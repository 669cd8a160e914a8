package lockfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fullEntry has a value for every V3 canonical field and every mutable
// field.
func fullEntry(t *testing.T) *Value {
	t.Helper()
	e := Obj()
	for _, f := range canonicalV3 {
		var v *Value
		switch f {
		case "_signatures":
			v = mustValue(t, `{"sigstore":{"bundle":"abc"}}`)
		case "publisher_slug":
			v = Str("acme")
		case "tools":
			v = mustValue(t, `[{"name":"echo","entrypoint":"bin/echo"}]`)
		case "permissions":
			v = mustValue(t, `{"network":{"level":"none"}}`)
		case "sandboxed", "mcp_preinstalled":
			v = &Value{Kind: Bool, Bool: true}
		default:
			v = Str("value-of-" + f)
		}
		e.Set(f, v)
	}
	for _, f := range mutableFields {
		e.Set(f, Str("mutable-"+f))
	}
	return e
}

func mustValue(t testing.TB, s string) *Value {
	t.Helper()
	v, err := ParseValue([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// clone deep-copies v (through its canonical form, which keeps numbers).
func clone(t testing.TB, v *Value) *Value {
	t.Helper()
	c, err := ParseValue(Indented(v))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sealedDoc is a document with one entry sealed at canonical version v.
func sealedDoc(t *testing.T, e *Value, v int) *Document {
	t.Helper()
	h, ok := EntryHash(e, v)
	if !ok {
		t.Fatal("unknown version")
	}
	e.Set(FieldIntegrity, Obj(Member{"algorithm", Str("sha256")}, Member{"canonical_version", Int(v)}, Member{"hash", Str(h)}))
	d := New()
	d.Packages().Set("pkg-one", e)
	d.Root.Set(FieldStructureDigest, StructureDigest(d))
	d.Seal(vectorKey())
	assertAllVerified(t, d.Verify(keyOf(vectorKey())))
	return d
}

func entryStatus(r *Report, slug string) Status {
	for _, e := range r.Entries {
		if e.Slug == slug {
			return e.Status
		}
	}
	return ""
}

// Changing any one canonical field of the entry's version breaks its
// _integrity (and so the structure stays, the seal breaks); changing a
// field outside the version does not break _integrity.
func TestEveryCanonicalFieldBreaksIntegrity(t *testing.T) {
	for v := 1; v <= 3; v++ {
		for _, f := range canonicalV3 {
			for _, how := range []string{"change", "remove", "null"} {
				t.Run(fmt.Sprintf("V%d/%s/%s", v, f, how), func(t *testing.T) {
					d := sealedDoc(t, fullEntry(t), v)
					e := d.Entry("pkg-one")
					switch how {
					case "change":
						e.Set(f, Str("tampered"))
					case "remove":
						e.Delete(f)
					case "null":
						e.Set(f, &Value{Kind: Null})
					}
					r := d.Verify(keyOf(vectorKey()))
					covered := slices.Contains(CanonicalFields(v), f)
					got := entryStatus(r, "pkg-one")
					if covered && got != Mismatch {
						t.Fatalf("%s changed (%s) but _integrity V%d is %s", f, how, v, got)
					}
					if !covered && got != Verified {
						t.Fatalf("%s is not a V%d field but _integrity is %s", f, v, got)
					}
					if r.Seal.Status != Mismatch {
						t.Fatalf("seal %s after changing %s", r.Seal.Status, f)
					}
				})
			}
		}
	}
}

// A number is hashed as written: 1 and 1.0 are different entries.
func TestNumberLiteralIsCanonical(t *testing.T) {
	e := fullEntry(t)
	e.Set("tools", mustValue(t, `[{"name":"x","max":1.0}]`))
	d := sealedDoc(t, clone(t, e), 3)
	d.Entry("pkg-one").Set("tools", mustValue(t, `[{"name":"x","max":1}]`))
	if got := entryStatus(d.Verify(nil), "pkg-one"); got != Mismatch {
		t.Fatalf("1.0 → 1: %s", got)
	}
	// Reordering keys or whitespace is not a change.
	d = sealedDoc(t, clone(t, e), 3)
	d.Entry("pkg-one").Set("tools", mustValue(t, `[ { "max" : 1.0 , "name" : "x" } ]`))
	if got := entryStatus(d.Verify(nil), "pkg-one"); got != Verified {
		t.Fatalf("reordered keys: %s", got)
	}
}

// Mutable fields are outside _integrity: only the keyed seal catches a
// change to them.
func TestMutableFieldsOnlyBreakTheSeal(t *testing.T) {
	for _, f := range mutableFields {
		t.Run(f, func(t *testing.T) {
			d := sealedDoc(t, fullEntry(t), 3)
			d.Entry("pkg-one").Set(f, Str("tampered"))
			r := d.Verify(keyOf(vectorKey()))
			if entryStatus(r, "pkg-one") != Verified || r.Structure.Status != Verified {
				t.Fatalf("integrity/structure: %s/%s", entryStatus(r, "pkg-one"), r.Structure.Status)
			}
			if r.Seal.Status != Mismatch {
				t.Fatalf("seal %s", r.Seal.Status)
			}
			if p, _ := r.Problems(false); len(p) != 1 || !strings.Contains(p[0], "seal") {
				t.Fatalf("problems %q", p)
			}
		})
	}
}

// The attack the seal exists for: trust_level promoted, _integrity and
// structure_digest recomputed. Only the keyed seal notices.
func TestPromotedTrustLevelCaughtOnlyBySeal(t *testing.T) {
	d, _ := vectorDoc(t)
	e := d.Entry("legacy-pack")
	e.Set("trust_level", Str("curated"))
	e.Set(FieldIntegrity, Integrity(e))
	d.Root.Set(FieldStructureDigest, StructureDigest(d))
	r := d.Verify(keyOf(vectorKey()))
	for _, er := range r.Entries {
		if er.Status != Verified {
			t.Fatalf("entry %s %s: the unkeyed digests should not notice", er.Slug, er.Status)
		}
	}
	if r.Structure.Status != Verified {
		t.Fatalf("structure %s", r.Structure.Status)
	}
	if r.Seal.Status != Mismatch {
		t.Fatalf("seal %s: the promotion went unnoticed", r.Seal.Status)
	}
	if p, _ := r.Problems(false); len(p) == 0 {
		t.Fatal("no problem reported")
	}
	// Without the key the seal cannot be checked: a warning, a problem
	// only in strict mode.
	r = d.Verify(func() ([]byte, error) { return nil, errors.New("no keychain") })
	if r.Seal.Status != Unverifiable {
		t.Fatalf("seal without key: %s", r.Seal.Status)
	}
	if p, w := r.Problems(false); len(p) != 0 || len(w) != 1 {
		t.Fatalf("normal: problems %q warnings %q", p, w)
	}
	if p, _ := r.Problems(true); len(p) != 1 {
		t.Fatalf("strict: problems %q", p)
	}
	// Another machine's key: mismatch.
	other := bytes.Repeat([]byte{7}, KeySize)
	if r := d.Verify(keyOf(other)); r.Seal.Status != Mismatch || !strings.Contains(r.Seal.Detail, "another key") {
		t.Fatalf("other key: %+v", r.Seal)
	}
}

func TestEntryAddedRemovedTransplanted(t *testing.T) {
	type step struct {
		name   string
		change func(d *Document)
	}
	steps := []step{
		{"added", func(d *Document) {
			e := clone(t, d.Entry("legacy-pack"))
			e.Set("version", Str("9.9.9"))
			e.Set(FieldIntegrity, Integrity(e))
			d.Packages().Set("new-pack", e)
		}},
		{"removed", func(d *Document) { d.Packages().Delete("legacy-pack") }},
		{"transplanted", func(d *Document) {
			// hello-tools' entry copied under another slug: its
			// _integrity still verifies on its own.
			d.Packages().Set("evil-tools", clone(t, d.Entry("hello-tools")))
		}},
		{"renamed", func(d *Document) {
			pk := d.Packages()
			for i := range pk.Obj {
				if pk.Obj[i].Key == "legacy-pack" {
					pk.Obj[i].Key = "legacy-pack2"
				}
			}
		}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			d, _ := vectorDoc(t)
			s.change(d)
			r := d.Verify(keyOf(vectorKey()))
			for _, e := range r.Entries {
				if e.Status != Verified {
					t.Fatalf("entry %s %s", e.Slug, e.Status)
				}
			}
			if r.Structure.Status != Mismatch || r.Seal.Status != Mismatch {
				t.Fatalf("structure %s, seal %s", r.Structure.Status, r.Seal.Status)
			}
			// The attacker recomputes the unkeyed structure digest too:
			// only the seal is left to catch it.
			d.Root.Set(FieldStructureDigest, StructureDigest(d))
			r = d.Verify(keyOf(vectorKey()))
			if r.Structure.Status != Verified || r.Seal.Status != Mismatch {
				t.Fatalf("after recomputing: structure %s, seal %s", r.Structure.Status, r.Seal.Status)
			}
		})
	}
}

func TestUnsupportedAndInvalid(t *testing.T) {
	cases := []struct {
		name   string
		change func(d *Document)
		part   string // entry, structure, seal
		want   Status
	}{
		{"lockfile_version", func(d *Document) { d.Root.Set(FieldLockfileVersion, Str("0.2")) }, "structure", Unsupported},
		{"canonical_version 4", func(d *Document) { d.Entry("legacy-pack").Get(FieldIntegrity).Set("canonical_version", Int(4)) }, "entry", Unsupported},
		{"canonical_version 1.0", func(d *Document) {
			d.Entry("legacy-pack").Get(FieldIntegrity).Set("canonical_version", &Value{Kind: Number, Str: "1.0"})
		}, "entry", Unsupported},
		{"entry algorithm", func(d *Document) { d.Entry("legacy-pack").Get(FieldIntegrity).Set("algorithm", Str("md5")) }, "entry", Unsupported},
		{"entry hash not hex", func(d *Document) { d.Entry("legacy-pack").Get(FieldIntegrity).Set("hash", Str("xyz")) }, "entry", Mismatch},
		{"entry integrity incomplete", func(d *Document) { d.Entry("legacy-pack").Get(FieldIntegrity).Delete("hash") }, "entry", Mismatch},
		{"entry integrity missing", func(d *Document) { d.Entry("legacy-pack").Delete(FieldIntegrity) }, "entry", Missing},
		{"structure algorithm", func(d *Document) { d.Root.Get(FieldStructureDigest).Set("algorithm", Str("sha1")) }, "structure", Unsupported},
		{"structure version", func(d *Document) { d.Root.Get(FieldStructureDigest).Set("canonicalization_version", Int(2)) }, "structure", Unsupported},
		{"structure hash", func(d *Document) { d.Root.Get(FieldStructureDigest).Set("hash", Str("00")) }, "structure", Invalid},
		{"structure missing", func(d *Document) { d.Root.Delete(FieldStructureDigest) }, "structure", Missing},
		{"seal algorithm", func(d *Document) { d.Root.Get(FieldSeal).Set("algorithm", Str("hmac-sha1")) }, "seal", Unsupported},
		{"seal incomplete", func(d *Document) { d.Root.Get(FieldSeal).Delete("key_id") }, "seal", Invalid},
		{"seal missing", func(d *Document) { d.Root.Delete(FieldSeal) }, "seal", Missing},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, _ := vectorDoc(t)
			c.change(d)
			r := d.Verify(keyOf(vectorKey()))
			var got Status
			switch c.part {
			case "entry":
				got = entryStatus(r, "legacy-pack")
			case "structure":
				got = r.Structure.Status
			case "seal":
				got = r.Seal.Status
			}
			if got != c.want {
				t.Fatalf("%s status %s, want %s", c.part, got, c.want)
			}
			normal, warnings := r.Problems(false)
			strict, _ := r.Problems(true)
			if len(strict) == 0 {
				t.Fatal("strict mode found no problem")
			}
			if c.want == Missing {
				if len(warnings) == 0 {
					t.Fatal("missing part: no warning")
				}
				// A missing part alone is a warning, but the change may
				// break something else too (the seal).
				for _, p := range normal {
					if strings.Contains(p, string(Missing)) {
						t.Fatalf("missing reported as a problem in normal mode: %q", p)
					}
				}
			} else if len(normal) == 0 {
				t.Fatalf("%s is not a problem in normal mode", c.want)
			}
		})
	}
}

const marker = "sk-live-SECRETMARKER42"

func TestParseErrorsLeakNoContent(t *testing.T) {
	good := `{"lockfile_version":"0.1","packages":{"p-one":{"version":"1.0.0"}}}`
	cases := map[string]string{
		"corrupt":                 `{"lockfile_version":"0.1","packages":{` + marker + `}}`,
		"truncated":               `{"lockfile_version":"0.1","packages":{"` + marker,
		"trailing data":           good + ` "` + marker + `"`,
		"trailing garbage":        good + marker,
		"duplicate top key":       `{"lockfile_version":"0.1","packages":{},"packages":{"` + marker + `":{}}}`,
		"duplicate slug":          `{"lockfile_version":"0.1","packages":{"` + marker + `":{},"` + marker + `":{}}}`,
		"duplicate nested key":    `{"lockfile_version":"0.1","packages":{"p-one":{"tools":[{"` + marker + `":1,"` + marker + `":2}]}}}`,
		"duplicate same value":    `{"lockfile_version":"0.1","lockfile_version":"0.1","packages":{}}`,
		"version not string":      `{"lockfile_version":"0.1","packages":{"` + marker + `":{"version":["` + marker + `"]}}}`,
		"packages not object":     `{"lockfile_version":"0.1","packages":"` + marker + `"}`,
		"entry not object":        `{"lockfile_version":"0.1","packages":{"` + marker + `":"` + marker + `"}}`,
		"lockfile_version number": `{"lockfile_version":0.1,"packages":{}}`,
		"no lockfile_version":     `{"packages":{"` + marker + `":{}}}`,
		"top level array":         `["` + marker + `"]`,
		"integrity not object":    `{"lockfile_version":"0.1","packages":{"p-one":{"_integrity":"` + marker + `"}}}`,
		"integrity hash number":   `{"lockfile_version":"0.1","packages":{"p-one":{"_integrity":{"algorithm":"sha256","canonical_version":1,"hash":1}}}}`,
		"canonical_version str":   `{"lockfile_version":"0.1","packages":{"p-one":{"_integrity":{"algorithm":"sha256","canonical_version":"` + marker + `","hash":"x"}}}}`,
		"structure not object":    `{"lockfile_version":"0.1","packages":{},"structure_digest":["` + marker + `"]}`,
		"seal hash not string":    `{"lockfile_version":"0.1","packages":{},"_agentnode_seal":{"algorithm":"hmac-sha256","key_id":"k","hash":{"` + marker + `":1}}}`,
		"trust_level number":      `{"lockfile_version":"0.1","packages":{"p-one":{"trust_level":5}}}`,
		"invalid utf-8":           `{"lockfile_version":"0.1","packages":{"` + marker + "\xff\xfe" + `":{}}}`,
		"lone surrogate":          `{"lockfile_version":"0.1","packages":{"` + marker + `\ud800":{}}}`,
		"lone low surrogate":      `{"lockfile_version":"0.1","packages":{"p-one":{"version":"` + marker + `\udc00x"}}}`,
		"empty slug":              `{"lockfile_version":"0.1","packages":{"":{"version":"` + marker + `"}}}`,
		"empty":                   ``,
		"too deep":                `{"lockfile_version":"0.1","packages":{"p-one":{"tools":` + strings.Repeat("[", 200) + `"` + marker + `"` + strings.Repeat("]", 200) + `}}}`,
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(doc))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "sk-") {
				t.Fatalf("error leaks content: %v", err)
			}
		})
	}
	// Errors still say where: known names, entry positions, indices.
	_, err := Parse([]byte(cases["duplicate nested key"]))
	if err == nil || !strings.Contains(err.Error(), "duplicate key in packages.entry #1.tools[0]") {
		t.Fatalf("duplicate nested key: %v", err)
	}
	_, err = Parse([]byte(cases["version not string"]))
	if err == nil || !strings.Contains(err.Error(), "packages entry #1: version must be a string, not an array") {
		t.Fatalf("wrong type: %v", err)
	}
	// A paired surrogate escape is fine.
	if _, err := Parse([]byte(`{"lockfile_version":"0.1","packages":{"p-one":{"version":"\ud83d\ude00 \\ud800"}}}`)); err != nil {
		t.Fatalf("paired surrogate / escaped backslash refused: %v", err)
	}
}

// Load wraps content errors with the path only.
func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "agentnode.lock")
	if _, err := Load(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	if err := os.WriteFile(p, []byte(`{"lockfile_version":"0.1","packages":{"a":1,"`+marker+`":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), p) {
		t.Fatalf("load: %v", err)
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
	d, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	r := d.Verify(nil)
	if entryStatus(r, "one-pack") != Verified || r.Structure.Status != Verified || r.Seal.Status != Missing {
		t.Fatalf("after first put: %+v", r)
	}
	if got := stringField(d.Root, FieldUpdatedAt); got != "2026-01-02T03:04:05Z" {
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
	d, err = Parse(after)
	if err != nil {
		t.Fatal(err)
	}
	assertAllVerified(t, d.Verify(keyOf(vectorKey())))
	orig, _ := Parse(data)
	for _, slug := range []string{"hello-tools", "legacy-pack"} {
		if !bytes.Equal(Indented(orig.Entry(slug)), Indented(d.Entry(slug))) {
			t.Errorf("entry %s changed", slug)
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 kept", fi.Mode().Perm())
	}
	if SelectCanonicalVersion(d.Entry("one-pack")) != 3 || entryStatus(d.Verify(nil), "one-pack") != Verified {
		t.Error("new entry not sealed at V3")
	}
	// A re-install keeps a trust_level cap the entry had.
	d.Entry("one-pack").Set("trust_level", Str("unverified"))
	d.Root.Delete(FieldSeal)
	d.Seal(vectorKey())
	if err := WriteFile(path, d); err != nil {
		t.Fatal(err)
	}
	if err := u.Put("one-pack", mustValue(t, `{"version":"1.0.1","publisher_slug":"acme"}`)); err != nil {
		t.Fatal(err)
	}
	d, _ = Load(path)
	if got := stringField(d.Entry("one-pack"), "trust_level"); got != "unverified" || stringField(d.Entry("one-pack"), "version") != "1.0.1" {
		t.Fatalf("re-install: trust_level %q, entry %s", got, Indented(d.Entry("one-pack")))
	}
	// Replacing an entry whose _integrity was tampered with is allowed.
	d.Entry("one-pack").Set("version", Str("6.6.6"))
	d.Root.Delete(FieldSeal)
	d.Seal(vectorKey())
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
	d, _ = Load(path)
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
		key    KeyFunc
		mutate func(d *Document)
		raw    []byte
		want   string
	}{
		{"seal key unreadable", func() ([]byte, error) { return nil, errors.New("keychain locked") }, nil, nil, "seal key cannot be read"},
		{"another entry tampered", keyOf(vectorKey()), func(d *Document) { d.Entry("legacy-pack").Set("version", Str("6.6.6")) }, nil, "does not verify"},
		{"seal broken", keyOf(vectorKey()), func(d *Document) { d.Entry("legacy-pack").Set("trust_level", Str("curated")) }, nil, "seal: mismatch"},
		{"structure broken", keyOf(vectorKey()), func(d *Document) {
			d.Root.Delete(FieldSeal)
			d.Root.Get(FieldStructureDigest).Set("hash", Str(strings.Repeat("0", 64)))
		}, nil, "structure_digest: mismatch"},
		{"unsupported version", keyOf(vectorKey()), func(d *Document) { d.Root.Delete(FieldSeal); d.Root.Set(FieldLockfileVersion, Str("0.2")) }, nil, "unsupported"},
		{"corrupt", keyOf(vectorKey()), nil, []byte(`{"packages":` + marker), "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "agentnode.lock")
			content := data
			if c.mutate != nil {
				d, _ := Parse(data)
				c.mutate(d)
				content = d.Marshal()
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

func TestIndentedRoundTrip(t *testing.T) {
	in := `{"b":[],"a":{},"n":[1.0,1e5,-0,12345678901234567890],"s":"<\u2028>é\u0000"}`
	v := mustValue(t, in)
	out := Indented(v)
	v2 := mustValue(t, string(out))
	if !bytes.Equal(Canonical(v), Canonical(v2)) {
		t.Fatalf("round trip changed the value:\n%s", out)
	}
	if got := string(Canonical(v)); got != "{\"a\":{},\"b\":[],\"n\":[1.0,1e5,-0,12345678901234567890],\"s\":\"<\u2028>é\\u0000\"}" {
		t.Fatalf("canonical %s", got)
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
	if got := stringField(e, FieldDepsHash); got != p.DepsHash {
		t.Fatalf("entry deps_hash %q, want %q", got, p.DepsHash)
	}
	d := sealedDoc(t, e, 3)
	e = d.Entry("pkg-one")
	e.Set(FieldDepsHash, Str("sha256:"+strings.Repeat("34", 32)))
	e.Set(FieldIntegrity, Integrity(e))
	d.Root.Set(FieldStructureDigest, StructureDigest(d))
	r := d.Verify(keyOf(vectorKey()))
	if entryStatus(r, "pkg-one") != Verified || r.Structure.Status != Verified {
		t.Fatalf("integrity/structure: %s/%s", entryStatus(r, "pkg-one"), r.Structure.Status)
	}
	if r.Seal.Status != Mismatch {
		t.Fatalf("seal %s after changing deps_hash", r.Seal.Status)
	}
	// Without dependencies there is no deps_hash.
	p.DepsHash = ""
	if e, _ := EntryFor(p, EntryInfo{}); e.Get(FieldDepsHash) != nil {
		t.Fatal("deps_hash written for a package without dependencies")
	}
	// A deps_hash that is not a string does not parse.
	if _, err := Parse([]byte(`{"lockfile_version":"0.1","packages":{"a-b":{"deps_hash":1}}}`)); err == nil {
		t.Fatal("a numeric deps_hash parsed")
	}
}
