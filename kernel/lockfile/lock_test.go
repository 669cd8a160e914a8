package lockfile_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/lockedit"
	. "github.com/agentnode/agentnode/kernel/lockfile"
)

// fullEntry has a value for every V3 canonical field and every mutable
// field.
func fullEntry(t *testing.T) *Value {
	t.Helper()
	e := Obj()
	for _, f := range CanonicalFields(3) {
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
	for _, f := range MutableFields {
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
	d := lockedit.New()
	d.Packages().Set("pkg-one", e)
	d.Root.Set(FieldStructureDigest, lockedit.StructureDigest(d))
	lockedit.Seal(d, vectorKey())
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
		for _, f := range CanonicalFields(3) {
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
	for _, f := range MutableFields {
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
			if p, _ := lockedit.Problems(r, false); len(p) != 1 || !strings.Contains(p[0], "seal") {
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
	e.Set(FieldIntegrity, lockedit.Integrity(e))
	d.Root.Set(FieldStructureDigest, lockedit.StructureDigest(d))
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
	if p, _ := lockedit.Problems(r, false); len(p) == 0 {
		t.Fatal("no problem reported")
	}
	// Without the key the seal cannot be checked: a warning, a problem
	// only in strict mode.
	r = d.Verify(func() ([]byte, error) { return nil, errors.New("no keychain") })
	if r.Seal.Status != Unverifiable {
		t.Fatalf("seal without key: %s", r.Seal.Status)
	}
	if p, w := lockedit.Problems(r, false); len(p) != 0 || len(w) != 1 {
		t.Fatalf("normal: problems %q warnings %q", p, w)
	}
	if p, _ := lockedit.Problems(r, true); len(p) != 1 {
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
			e.Set(FieldIntegrity, lockedit.Integrity(e))
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
			d.Root.Set(FieldStructureDigest, lockedit.StructureDigest(d))
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
			normal, warnings := lockedit.Problems(r, false)
			strict, _ := lockedit.Problems(r, true)
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
