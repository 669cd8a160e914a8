package audit

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/specs"
)

// baseLine is a valid line in the canonical layout, without its newline,
// with exit_code and duration_ms present.
func baseLine(t testing.TB) []byte {
	t.Helper()
	r := typical(1)
	r.Seq = 42
	r.TS = time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC)
	r.Prev = strings.Repeat("0a", 32)
	line, _ := seal(appendBody(nil, r))
	return line[:len(line)-1]
}

// TestScannerAgreesWithSchema mutates a valid line one constraint at a time
// and checks the fast scanner against the JSON Schema validator: wherever
// the line keeps the canonical layout they must agree exactly (so the
// scanner implements every constraint of the schema); elsewhere the scanner
// may only be stricter, and the slow path takes over.
func TestScannerAgreesWithSchema(t *testing.T) {
	base := baseLine(t)
	if _, ok := scanCanonical(base); !ok {
		t.Fatalf("base line rejected: %s", base)
	}
	if err := validateSchema(base); err != nil {
		t.Fatalf("base line invalid: %v", err)
	}
	sub := func(old, new string) []byte {
		if !bytes.Contains(base, []byte(old)) {
			t.Fatalf("base line has no %q", old)
		}
		return bytes.Replace(base, []byte(old), []byte(new), 1)
	}
	canonical := []struct {
		line  []byte
		valid bool
	}{
		{sub(`"seq":42`, `"seq":1`), true},
		{sub(`"seq":42`, `"seq":0`), false},
		{sub(`"seq":42`, `"seq":9007199254740991`), true},
		{sub(`"seq":42`, `"seq":9007199254740992`), false},
		{sub(`"seq":42`, `"seq":-1`), false},
		{sub(`"seq":42`, `"seq":"42"`), false},
		{sub(`"ts":"2026-03-04T05:06:07.123456789Z"`, `"ts":"2026-03-04T05:06:07Z"`), true},
		{sub(`"ts":"2026-03-04T05:06:07.123456789Z"`, `"ts":"2026-03-04T05:06:07.1Z"`), true},
		{sub(`"ts":"2026-03-04T05:06:07.123456789Z"`, `"ts":"2024-02-29T23:59:59Z"`), true},
		{sub(`"ts":"2026-03-04T05:06:07.123456789Z"`, `"ts":"2026-02-29T05:06:07Z"`), false},
		{sub(`"ts":"2026-03-04T05:06:07.123456789Z"`, `"ts":"2026-13-04T05:06:07Z"`), false},
		{sub(`"ts":"2026-03-04T05:06:07.123456789Z"`, `"ts":"2026-03-04T24:06:07Z"`), false},
		{sub(`"ts":"2026-03-04T05:06:07.123456789Z"`, `"ts":"2026-03-04T05:60:07Z"`), false},
		{sub(`"ts":"2026-03-04T05:06:07.123456789Z"`, `"ts":"2026-03-04T05:06:07.1234567891Z"`), false},
		{sub(`"ts":"2026-03-04T05:06:07.123456789Z"`, `"ts":"2026-03-04T05:06:07.Z"`), false},
		{sub(`"ts":"2026-03-04T05:06:07.123456789Z"`, `"ts":"2026-03-04T05:06:07+01:00"`), false},
		{sub(`"ts":"2026-03-04T05:06:07.123456789Z"`, `"ts":"2026-03-04 05:06:07Z"`), false},
		{sub(`"ts":"2026-03-04T05:06:07.123456789Z"`, `"ts":"yesterday"`), false},
		{sub(`"event":"outcome"`, `"event":"torn_tail"`), true},
		{sub(`"event":"outcome"`, `"event":"x9_"`), true},
		{sub(`"event":"outcome"`, `"event":""`), false},
		{sub(`"event":"outcome"`, `"event":"Outcome"`), false},
		{sub(`"event":"outcome"`, `"event":"9x"`), false},
		{sub(`"event":"outcome"`, `"event":"`+strings.Repeat("a", 65)+`"`), false},
		{sub(`"trust":"verified"`, `"trust":""`), true},
		{sub(`"trust":"verified"`, `"trust":"curated"`), true},
		{sub(`"trust":"verified"`, `"trust":"root"`), false},
		{sub(`"placement":"sandbox"`, `"placement":"host"`), true},
		{sub(`"placement":"sandbox"`, `"placement":"none"`), true},
		{sub(`"placement":"sandbox"`, `"placement":""`), false},
		{sub(`"decision":"allow"`, `"decision":"prompt"`), true},
		{sub(`"decision":"allow"`, `"decision":"ALLOW"`), false},
		{sub(`"code":""`, `"code":"policy_denied"`), true},
		{sub(`"code":""`, `"code":"Policy"`), false},
		{sub(`"code":""`, `"code":"_x"`), false},
		{sub(`"reason":"allowed`, `"reason":"\u00e9\n\t\"\\\/ \ud83e\udd80 allowed`), true},
		{sub(`"reason":"allowed`, `"reason":"`+"\x01"+`allowed`), false},
		{sub(`"reason":"allowed`, `"reason":"\x allowed`), false},
		{sub(`"reason":"allowed`, `"reason":"\u12G4 allowed`), false},
		{sub(`"guard_chain":["policy","secret-scan","path-guard"]`, `"guard_chain":[]`), true},
		{sub(`"guard_chain":["policy","secret-scan","path-guard"]`, `"guard_chain":["a"]`), true},
		{sub(`"guard_chain":["policy","secret-scan","path-guard"]`, `"guard_chain":[1]`), false},
		{sub(`"guard_chain":["policy","secret-scan","path-guard"]`, `"guard_chain":null`), false},
		{sub(`"guard_chain":["policy","secret-scan","path-guard"]`, `"guard_chain":["a",]`), false},
		{sub(`"ci":false`, `"ci":true`), true},
		{sub(`"ci":false`, `"ci":0`), false},
		{sub(`"root":false}`, `"root":false,"home":"/root"}`), false},
		{sub(`"root":false}`, `}`), false},
		{sub(`"exit_code":0,`, ``), true},
		{sub(`"root":false},`, `"root":false},"workspace":"read-write /home/u/p",`), true},
		{sub(`"root":false},`, `"root":false},"workspace":"",`), true},
		{sub(`"root":false},`, `"root":false},"workspace":1,`), false},
		{sub(`"root":false},`, `"root":false},"workspace":null,`), false},
		{sub(`"exit_code":0,"duration_ms":1234,`, ``), true},
		{sub(`"exit_code":0`, `"exit_code":-9`), true},
		{sub(`"exit_code":0`, `"exit_code":2147483647`), true},
		{sub(`"exit_code":0`, `"exit_code":-2147483648`), true},
		{sub(`"exit_code":0`, `"exit_code":2147483648`), false},
		{sub(`"exit_code":0`, `"exit_code":-2147483649`), false},
		{sub(`"exit_code":0`, `"exit_code":null`), false},
		{sub(`"duration_ms":1234`, `"duration_ms":0`), true},
		{sub(`"duration_ms":1234`, `"duration_ms":-1`), false},
		{sub(`"prev":"0a0a`, `"prev":"0A0a`), false},
		{sub(`"prev":"0a0a`, `"prev":"0a0`), false},
		{sub(`"prev":"0a0a`, `"prev":"0a0a0`), false},
		{sub(`"prev":"0a0a`, `"prev":"0a0g`), false},
		{sub(`,"hash":"`, `,"output":"x","hash":"`), false},
		{sub(`"version":"1.4.2",`, ``), false},
	}
	for i, c := range canonical {
		_, fast := scanCanonical(c.line)
		schemaErr := validateSchema(c.line)
		if fast != c.valid || (schemaErr == nil) != c.valid {
			t.Errorf("case %d: scanner %v, schema %v, want valid=%v: %s", i, fast, schemaErr, c.valid, c.line)
		}
	}

	// Not the canonical layout, yet valid: the scanner rejects, the slow
	// path (schema) accepts and finds the same chain fields.
	li0, _ := scanCanonical(base)
	for i, line := range [][]byte{
		sub(`{"seq":42,`, `{ "seq" : 42 ,`),
		sub(`"seq":42,"ts":"2026-03-04T05:06:07.123456789Z"`, `"ts":"2026-03-04T05:06:07.123456789Z","seq":42`),
		sub(`"decision":"allow"`, `"decision":"\u0061llow"`),
		sub(`"seq":42`, `"seq":42.0`),
		sub(`"reason":"allowed`, `"reason":"`+"\xff"+`allowed`), // JSON decoders take invalid UTF-8 as U+FFFD
	} {
		if _, fast := scanCanonical(line); fast {
			t.Errorf("non-canonical %d accepted by the scanner: %s", i, line)
		}
		li, problem, detail := parseSlow(line)
		if i == 3 {
			// 42.0 is an integer to JSON Schema but not to encoding/json.
			if problem != ProblemParseError {
				t.Errorf("42.0: %q %q", problem, detail)
			}
			continue
		}
		if problem != "" || li.Seq != li0.Seq || !bytes.Equal(li.Prev, li0.Prev) || !bytes.Equal(li.Hash, li0.Hash) {
			t.Errorf("non-canonical %d: %+v %q %q", i, li, problem, detail)
		}
	}
	// Valid JSON and schema, but the hash member is not last.
	moved := sub(`{"seq":42,`, `{"hash":"`+strings.Repeat("0", 64)+`","seq":42,`)
	moved = bytes.Replace(moved, []byte(`,"hash":"`+string(li0.Hash)+`"}`), []byte(`}`), 1)
	if _, p, _ := parseSlow(moved); p != ProblemParseError {
		t.Errorf("hash member first: %q", p)
	}
}

// FuzzScanCanonical holds the scanner to the reference path it stands in
// for: whatever the scanner accepts, parseSlow (encoding/json, the JSON
// Schema, the hash member last) accepts with the same chain fields, and
// the schema and encoding/json on their own agree. A line the scanner
// refuses is decided by parseSlow itself (parseLine), so refusing more is
// safe; accepting more is what this looks for.
func FuzzScanCanonical(f *testing.F) {
	base := baseLine(f)
	f.Add(base)
	f.Add(bytes.Replace(base, []byte(`"reason":"allowed`), []byte(`"reason":"\ud800\u0000`), 1))
	f.Add(bytes.Replace(base, []byte(`"exit_code":0,"duration_ms":1234,`), nil, 1))
	f.Add([]byte(`{"seq":1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		li, ok := scanCanonical(line)
		if !ok {
			return
		}
		ref, p, detail := parseSlow(line)
		if p != "" {
			t.Fatalf("scanner accepted a line the reference rejects (%s: %s): %s", p, detail, line)
		}
		if ref.Seq != li.Seq || !bytes.Equal(ref.Prev, li.Prev) || !bytes.Equal(ref.Hash, li.Hash) ||
			!bytes.Equal(ref.Event, li.Event) || !bytes.Equal(ref.Decision, li.Decision) ||
			!bytes.Contains(li.RequestID, []byte{'\\'}) && !bytes.Equal(ref.RequestID, li.RequestID) {
			t.Fatalf("scanner and reference disagree: %+v vs %+v", li, ref)
		}
		if err := validateSchema(line); err != nil {
			t.Fatalf("scanner accepted a line the schema rejects (%v): %s", err, line)
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("scanner accepted a line encoding/json rejects (%v): %s", err, line)
		}
		if r.Seq != li.Seq || r.Prev != string(li.Prev) || r.Hash != string(li.Hash) {
			t.Fatalf("scanner and encoding/json disagree: %d %s %s vs %+v", li.Seq, li.Prev, li.Hash, r)
		}
		if r.Event != string(li.Event) || r.Decision != string(li.Decision) ||
			!bytes.Contains(li.RequestID, []byte{'\\'}) && r.RequestID != string(li.RequestID) {
			t.Fatalf("scanner and encoding/json disagree: event %q decision %q request_id %q vs %+v", li.Event, li.Decision, li.RequestID, r)
		}
	})
}

func TestSchemaLoadsFromSpecs(t *testing.T) {
	sch, err := recordSchema()
	if err != nil || sch == nil {
		t.Fatalf("schema: %v", err)
	}
	// additionalProperties false at the top and in env; every Record field
	// is a property and nothing else.
	var doc struct {
		AdditionalProperties *bool `json:"additionalProperties"`
		Properties           map[string]struct {
			AdditionalProperties *bool `json:"additionalProperties"`
		} `json:"properties"`
	}
	raw, err := specs.Schemas.ReadFile(SchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.AdditionalProperties == nil || *doc.AdditionalProperties {
		t.Fatal("schema allows additional properties")
	}
	if ap := doc.Properties["env"].AdditionalProperties; ap == nil || *ap {
		t.Fatal("env allows additional properties")
	}
	var fields []string
	for _, k := range strings.Split(`seq ts event request_id package version tool action trust placement backend decision code reason guard_chain env workspace runtime exit_code duration_ms prev hash`, " ") {
		fields = append(fields, k)
		if _, ok := doc.Properties[k]; !ok {
			t.Errorf("schema lacks %s", k)
		}
	}
	if len(doc.Properties) != len(fields) {
		t.Errorf("schema has %d properties, Record %d", len(doc.Properties), len(fields))
	}
}

// BenchmarkScanCanonical is the fast scanner on one typical line, next to
// BenchmarkParseSlow, the reference it stands in for (encoding/json, the
// JSON Schema and json.Unmarshal): the gain is stated in record.go.
func BenchmarkScanCanonical(b *testing.B) {
	line := baseLine(b)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := scanCanonical(line); !ok {
			b.Fatal("rejected")
		}
	}
}

func BenchmarkParseSlow(b *testing.B) {
	line := baseLine(b)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, p, d := parseSlow(line); p != "" {
			b.Fatal(p, d)
		}
	}
}
