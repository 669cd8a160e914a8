package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/agentnode/agentnode/sdk/guard"
	"github.com/agentnode/agentnode/sdk/guard/schemacheck"
)

// FuzzInspect feeds arbitrary input and schema bytes (and network levels)
// to the inspector: it must never panic or fail, and must always give a
// valid verdict that is explained, deterministic and fail-closed for input
// that is not JSON or too large. The committed seeds are in
// testdata/fuzz/FuzzInspect.
func FuzzInspect(f *testing.F) {
	for _, s := range []struct{ input, schema, net string }{
		{`{"path":"notes.txt"}`, `{"type":"object","properties":{"path":{"type":"string","maxLength":255}}}`, "none"},
		{`{"path":"../x"}`, ``, "none"},
		{`{"u":"https://example.com"}`, `{"properties":{"u":{"type":"string","format":"uri"}}}`, "none"},
		{`{"t":"a;b"}`, `{"properties":{"t":{"$ref":"#/$defs/t"}},"$defs":{"t":{"type":"string"}}}`, "unrestricted"},
		{`[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]`, `true`, "restricted"},
		{`{"a":1,"a":2}`, `false`, ""},
		{`{"path": `, `{"type":`, "none"},
	} {
		f.Add([]byte(s.input), []byte(s.schema), s.net)
	}
	// The size rules, built here rather than committed as megabyte files:
	// a payload over 1 MiB, a string over 1,000,000 characters, a
	// multi-byte string under the limit in code points, more than 10,000
	// keys. They run as regression seeds with plain `go test`; while
	// fuzzing they are left out, since mutating megabyte inputs would slow
	// the fuzzer down a hundredfold (inspect_test.go covers the limits at
	// their boundaries).
	if fl := flag.Lookup("test.fuzz"); fl == nil || fl.Value.String() == "" {
		addSizeSeeds(f)
	}
	f.Add([]byte(`{}`), []byte(`{"type":"nonsense"}`), "none")
	insp := NewInspector()
	checker := schemacheck.NewChecker(64)
	f.Fuzz(func(t *testing.T, input, schema []byte, net string) {
		req := &guard.InspectRequest{
			Tool:            "fuzz",
			Permissions:     guard.Permissions{NetworkLevel: net},
			InputJSON:       input,
			InputSchemaJSON: schema,
			SchemaCheck:     checker.Check(schema, input), // as the host does
		}
		// inspect, not Inspect: a panic must fail the fuzz test, not be
		// turned into a deny.
		resp, err := insp.inspect(context.Background(), req)
		if err != nil {
			t.Fatalf("inspect: %v", err)
		}
		switch resp.Verdict {
		case guard.VerdictAllow:
			if len(resp.Reasons) != 0 {
				t.Fatalf("allow with reasons %q", resp.Reasons)
			}
		case guard.VerdictPrompt, guard.VerdictDeny:
			if len(resp.Reasons) == 0 || len(resp.Reasons) > MaxReasons {
				t.Fatalf("%s with %d reasons", resp.Verdict, len(resp.Reasons))
			}
		default:
			t.Fatalf("verdict %q", resp.Verdict)
		}
		if (!json.Valid(input) || len(input) > MaxPayloadBytes) && resp.Verdict != guard.VerdictDeny {
			t.Fatalf("input that is not JSON or too large got %s %q", resp.Verdict, resp.Reasons)
		}
		again, err := insp.inspect(context.Background(), req)
		if err != nil || !reflect.DeepEqual(again, resp) {
			t.Fatalf("not deterministic: %+v then %+v (%v)", resp, again, err)
		}
	})
}

// addSizeSeeds adds the seeds of the size rules.
func addSizeSeeds(f *testing.F) {
	f.Add([]byte(`{"s":"`+strings.Repeat("a", MaxPayloadBytes)+`"}`), []byte(nil), "none")
	f.Add([]byte(`{"s":"`+strings.Repeat("a", MaxStringChars+1)+`"}`), []byte(nil), "none")
	f.Add([]byte(`["`+strings.Repeat("é", MaxStringChars/2)+`"]`), []byte(`{"items":{"type":"string"}}`), "none")
	var keys strings.Builder
	keys.WriteString("{")
	for i := range MaxKeys + 1 {
		if i > 0 {
			keys.WriteString(",")
		}
		fmt.Fprintf(&keys, `"k%d":0`, i)
	}
	keys.WriteString("}")
	f.Add([]byte(keys.String()), []byte(nil), "none")
}

// Independent statements of the facts' string rules, for FuzzRules.
var (
	anyURL    = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://`)
	awsKey    = regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`)
	shellRune = ";&|`$"
)

// FuzzRules puts one fuzzed string into an input, as a value without a
// schema or as an object key, and checks each string rule from the
// attacker's side, stated independently of rules.go: "../" or ".." denies;
// a value starting with "/" denies; a scheme:// URL denies unless the
// package declares network; a shell token in a value never passes as allow;
// an AWS access key id denies and is never echoed in a reason. The
// committed seeds are in testdata/fuzz/FuzzRules.
func FuzzRules(f *testing.F) {
	for _, s := range []string{"notes.txt", "../etc", "..", "/etc/passwd", "https://x.test/", "a;b", "$(id)",
		"AKIAIOSFODNN7EXAMPLE", "C:\\x", "%2e%2e%2f"} {
		f.Add(s, "none", false)
	}
	insp := NewInspector()
	f.Fuzz(func(t *testing.T, s, net string, asKey bool) {
		var doc any = map[string]any{"v": s}
		if asKey {
			doc = map[string]any{s: 1}
		}
		input, err := json.Marshal(doc)
		if err != nil {
			t.Skip()
		}
		// What the inspector sees: invalid UTF-8 became U+FFFD.
		var back map[string]any
		if err := json.Unmarshal(input, &back); err != nil {
			t.Fatalf("round trip: %v", err)
		}
		d := s
		for k, v := range back {
			if d = k; !asKey {
				d = v.(string)
			}
		}
		resp, err := insp.inspect(context.Background(), &guard.InspectRequest{Tool: "t",
			Permissions: guard.Permissions{NetworkLevel: net}, InputJSON: input})
		if err != nil {
			t.Fatalf("inspect: %v", err)
		}
		why := func(rule string) string {
			return fmt.Sprintf("%s: got %s %q for %q", rule, resp.Verdict, resp.Reasons, d)
		}
		trimmed := strings.TrimLeftFunc(d, unicode.IsSpace)
		switch {
		case strings.Contains(d, "../") || strings.TrimSpace(d) == "..":
			if resp.Verdict != guard.VerdictDeny {
				t.Fatal(why("traversal"))
			}
		case strings.HasPrefix(trimmed, "/"):
			if resp.Verdict != guard.VerdictDeny {
				t.Fatal(why("absolute path"))
			}
		case net != "restricted" && net != "unrestricted" && anyURL.MatchString(d):
			if resp.Verdict != guard.VerdictDeny {
				t.Fatal(why("URL with network none"))
			}
		case !asKey && strings.ContainsAny(d, shellRune):
			if resp.Verdict == guard.VerdictAllow {
				t.Fatal(why("shell token"))
			}
		}
		if m := awsKey.FindString(d); m != "" {
			if resp.Verdict != guard.VerdictDeny {
				t.Fatal(why("secret"))
			}
			for _, r := range resp.Reasons {
				if strings.Contains(r, m) {
					t.Fatalf("a reason echoes the secret: %q", r)
				}
			}
		}
	})
}
