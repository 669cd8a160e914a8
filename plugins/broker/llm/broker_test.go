package main

// These tests run the broker through the real go-plugin gRPC path in memory
// (brokertest) against real local HTTP servers. The credential comes from a
// stand-in for the keychain here; plugin_test.go runs the built binary
// against the real OS keychain.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentnode/agentnode/sdk/broker"
	"github.com/agentnode/agentnode/sdk/broker/brokertest"
	"github.com/agentnode/agentnode/sdk/broker/provider"
)

const (
	testKey = "sk-test-KEY-7f3a9c"   // what the keychain holds
	marker  = "PROVIDER-BODY-MARKER" // provider text that must never reach the caller
)

// seen is one request as the provider received it.
type seen struct {
	method, path, query string
	header              http.Header
	body                []byte
}

// fakeProvider is a real HTTP server speaking one API. It answers every
// request with status and body (a valid reply by default) and records what
// it received.
type fakeProvider struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []seen
	status int
	body   string
}

func newProvider(t testing.TB, api string) *fakeProvider {
	p := &fakeProvider{status: http.StatusOK}
	switch api {
	case provider.Anthropic:
		p.body = `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Hello "},` +
			`{"type":"tool_use","id":"x","name":"n","input":{}},{"type":"text","text":"wörld"}],"usage":{"input_tokens":11,"output_tokens":3}}`
	default:
		p.body = `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello wörld"},` +
			`"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`
	}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.reqs = append(p.reqs, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), b})
		status, body := p.status, p.body
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if status >= 300 && status < 400 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *fakeProvider) set(status int, body string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status, p.body = status, body
}

func (p *fakeProvider) requests() []seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seen(nil), p.reqs...)
}

// staticKeys is the keychain stand-in: it serves keys by service and
// counts reads.
type staticKeys struct {
	keys  map[string]string
	reads atomic.Int64
}

func (s *staticKeys) get(service, user string) (string, error) {
	s.reads.Add(1)
	if user != provider.KeychainUser {
		return "", errNoKey
	}
	k, ok := s.keys[service]
	if !ok {
		return "", errNoKey
	}
	return k, nil
}

func connect(t testing.TB, get keyGetter) *broker.Client {
	return brokertest.Connect(t, info(), newBroker(nil, get))
}

func keysFor(name, key string) *staticKeys {
	return &staticKeys{keys: map[string]string{provider.KeychainService(name): key}}
}

// assertKeyOnlyIn fails unless the key arrived in exactly the auth header
// of the API and nowhere else: not in the URL, the body or another header.
func assertKeyOnlyIn(t *testing.T, r seen, api string) {
	t.Helper()
	authHeader, want := "Authorization", "Bearer "+testKey
	if api == provider.Anthropic {
		authHeader, want = "X-Api-Key", testKey
	}
	if got := r.header.Values(authHeader); len(got) != 1 || got[0] != want {
		t.Errorf("%s = %q, want %q", authHeader, got, want)
	}
	for name, vs := range r.header {
		if name == authHeader {
			continue
		}
		for _, v := range vs {
			if strings.Contains(v, testKey) {
				t.Errorf("the key arrived in header %s too", name)
			}
		}
	}
	if strings.Contains(r.path+r.query, testKey) || strings.Contains(string(r.body), testKey) {
		t.Error("the key arrived in the URL or body")
	}
}

func TestOpenAIChat(t *testing.T) {
	p := newProvider(t, provider.OpenAI)
	c := connect(t, keysFor("local", testKey).get)
	resp, err := c.Chat(t.Context(), &broker.ChatRequest{
		Provider: "local", API: provider.OpenAI, BaseURL: p.URL + "/v1", Model: "llama3",
		Messages:      []broker.Message{{Role: broker.RoleSystem, Content: "be brief"}, {Role: broker.RoleUser, Content: "héllo"}},
		MaxInputChars: 13, MaxOutputChars: 100, AllowedModels: []string{"gpt-4o", "llama3"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := broker.ChatResponse{
		Message: broker.Message{Role: broker.RoleAssistant, Content: "Hello wörld"},
		Usage:   broker.Usage{InputChars: 13, OutputChars: 11, InputTokens: 9, OutputTokens: 2},
	}
	if *resp != want {
		t.Errorf("response %+v, want %+v", *resp, want)
	}
	reqs := p.requests()
	if len(reqs) != 1 {
		t.Fatalf("provider got %d requests", len(reqs))
	}
	r := reqs[0]
	if r.method != http.MethodPost || r.path != "/v1/chat/completions" {
		t.Errorf("%s %s", r.method, r.path)
	}
	assertKeyOnlyIn(t, r, provider.OpenAI)
	if r.header.Get("X-Api-Key") != "" {
		t.Error("an OpenAI request carries x-api-key")
	}
	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	wantBody := `{"messages":[{"content":"be brief","role":"system"},{"content":"héllo","role":"user"}],"model":"llama3"}`
	if got, _ := json.Marshal(body); string(got) != wantBody {
		t.Errorf("body %s, want %s", got, wantBody)
	}
}

func TestAnthropicChat(t *testing.T) {
	p := newProvider(t, provider.Anthropic)
	c := connect(t, keysFor("claude", testKey).get)
	resp, err := c.Chat(t.Context(), &broker.ChatRequest{
		Provider: "claude", API: provider.Anthropic, BaseURL: p.URL, Model: "claude-x",
		Messages: []broker.Message{
			{Role: broker.RoleSystem, Content: "rule 1"}, {Role: broker.RoleUser, Content: "hi"},
			{Role: broker.RoleAssistant, Content: "yes?"}, {Role: broker.RoleSystem, Content: "rule 2"},
			{Role: broker.RoleUser, Content: "go"},
		},
		MaxOutputChars: 500,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := broker.ChatResponse{
		Message: broker.Message{Role: broker.RoleAssistant, Content: "Hello wörld"},
		Usage:   broker.Usage{InputChars: 20, OutputChars: 11, InputTokens: 11, OutputTokens: 3},
	}
	if *resp != want {
		t.Errorf("response %+v, want %+v", *resp, want)
	}
	r := p.requests()[0]
	if r.path != "/v1/messages" || r.header.Get("Anthropic-Version") != provider.AnthropicVersion {
		t.Errorf("path %s, anthropic-version %q", r.path, r.header.Get("Anthropic-Version"))
	}
	assertKeyOnlyIn(t, r, provider.Anthropic)
	if r.header.Get("Authorization") != "" {
		t.Error("an Anthropic request carries Authorization")
	}
	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	wantBody := `{"max_tokens":500,"messages":[{"content":"hi","role":"user"},{"content":"yes?","role":"assistant"},` +
		`{"content":"go","role":"user"}],"model":"claude-x","system":"rule 1\n\nrule 2"}`
	if got, _ := json.Marshal(body); string(got) != wantBody {
		t.Errorf("body %s, want %s", got, wantBody)
	}
}

// TestWellKnownDefaults: with no API given, a well-known provider's name is
// its API; a custom name without an API is refused before anything is read.
func TestWellKnownDefaults(t *testing.T) {
	p := newProvider(t, provider.Anthropic)
	c := connect(t, keysFor("anthropic", testKey).get)
	_, err := c.Chat(t.Context(), &broker.ChatRequest{Provider: "anthropic", BaseURL: p.URL, Model: "m",
		Messages: []broker.Message{{Role: broker.RoleUser, Content: "x"}}})
	if err != nil || len(p.requests()) != 1 || p.requests()[0].path != "/v1/messages" {
		t.Fatalf("err %v, requests %+v", err, p.requests())
	}
	keys := keysFor("custom", testKey)
	_, err = connect(t, keys.get).Chat(t.Context(), &broker.ChatRequest{Provider: "custom", BaseURL: p.URL, Model: "m",
		Messages: []broker.Message{{Role: broker.RoleUser, Content: "x"}}})
	if !errors.Is(err, broker.ErrInvalidRequest) || !strings.Contains(err.Error(), "no api given") || keys.reads.Load() != 0 {
		t.Fatalf("custom provider without api: %v (keychain reads %d)", err, keys.reads.Load())
	}
}

// TestProviderErrorsSanitized plays a hostile or broken provider: its error
// bodies carry a marker and echo the key. Neither reaches the caller.
func TestProviderErrorsSanitized(t *testing.T) {
	hostile := `{"error":{"message":"` + marker + ` your key ` + testKey + ` is bad"}}`
	cases := []struct {
		status int
		body   string
		want   error
		text   string
	}{
		{401, hostile, broker.ErrCredentialsRejected, "HTTP 401"},
		{403, hostile, broker.ErrCredentialsRejected, "HTTP 403"},
		{400, hostile, broker.ErrProviderFailed, "rejected the request (HTTP 400)"},
		{404, hostile, broker.ErrProviderFailed, "HTTP 404"},
		{422, hostile, broker.ErrProviderFailed, "HTTP 422"},
		{429, hostile, broker.ErrProviderFailed, "rate limiting"},
		{500, hostile, broker.ErrProviderFailed, "unavailable (HTTP 500)"},
		{503, hostile, broker.ErrProviderFailed, "HTTP 503"},
		{307, hostile, broker.ErrProviderFailed, "redirect"},
		{200, marker + testKey + ` not json`, broker.ErrProviderFailed, "not a valid"},
		{200, `{"choices":[],"detail":"` + marker + testKey + `"}`, broker.ErrProviderFailed, "no choices"},
		{200, `{"choices":[{"message":{"content":"` + strings.Repeat("x", maxReplyBytes) + `"}}]}`, broker.ErrProviderFailed, "larger than"},
	}
	for _, api := range []string{provider.OpenAI, provider.Anthropic} {
		p := newProvider(t, api)
		c := connect(t, keysFor("p", testKey).get)
		for _, tc := range cases {
			if api == provider.Anthropic && tc.text == "no choices" {
				continue
			}
			p.set(tc.status, tc.body)
			_, err := c.Chat(t.Context(), &broker.ChatRequest{Provider: "p", API: api, BaseURL: p.URL, Model: "m",
				Messages: []broker.Message{{Role: broker.RoleUser, Content: "hi"}}})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("%s %d: error %v, want %v containing %q", api, tc.status, err, tc.want, tc.text)
			}
			if err != nil && (strings.Contains(err.Error(), marker) || strings.Contains(err.Error(), testKey)) {
				t.Errorf("%s %d: error carries the provider's text or the key: %v", api, tc.status, err)
			}
		}
	}
}

// TestGarbageServerSanitized: a server that does not speak HTTP; Go's
// transport error would quote its bytes.
func TestGarbageServerSanitized(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				buf := make([]byte, 4096)
				_, _ = conn.Read(buf)
				_, _ = io.WriteString(conn, marker+" "+testKey+"\r\n\r\n")
			}()
		}
	}()
	c := connect(t, keysFor("p", testKey).get)
	_, err = c.Chat(t.Context(), &broker.ChatRequest{Provider: "p", API: provider.OpenAI, BaseURL: "http://" + l.Addr().String(),
		Model: "m", Messages: []broker.Message{{Role: broker.RoleUser, Content: "hi"}}})
	if !errors.Is(err, broker.ErrProviderFailed) || strings.Contains(err.Error(), marker) || strings.Contains(err.Error(), testKey) {
		t.Fatalf("error %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	c := connect(t, keysFor("p", testKey).get)
	_, err = c.Chat(t.Context(), &broker.ChatRequest{Provider: "p", API: provider.OpenAI, BaseURL: "http://" + addr,
		Model: "m", Messages: []broker.Message{{Role: broker.RoleUser, Content: "hi"}}})
	if !errors.Is(err, broker.ErrProviderFailed) || !strings.Contains(err.Error(), "cannot connect (connection refused)") {
		t.Fatalf("error %v", err)
	}
}

// TestRedirectNotFollowed: a provider redirecting to another host must not
// get the key carried there (Go forwards custom headers such as x-api-key
// on redirects).
func TestRedirectNotFollowed(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(other.Close)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/v1/messages", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	for _, api := range []string{provider.OpenAI, provider.Anthropic} {
		c := connect(t, keysFor("p", testKey).get)
		_, err := c.Chat(t.Context(), &broker.ChatRequest{Provider: "p", API: api, BaseURL: redirect.URL, Model: "m",
			Messages: []broker.Message{{Role: broker.RoleUser, Content: "hi"}}})
		if !errors.Is(err, broker.ErrProviderFailed) || !strings.Contains(err.Error(), "redirect") {
			t.Errorf("%s: error %v", api, err)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the redirect target got %d requests", n)
	}
}

// TestCeilings: models and input are refused before the keychain or the
// provider is touched; the reply is cut to max_output_chars.
func TestCeilings(t *testing.T) {
	p := newProvider(t, provider.OpenAI)
	keys := keysFor("p", testKey)
	c := connect(t, keys.get)
	base := broker.ChatRequest{Provider: "p", API: provider.OpenAI, BaseURL: p.URL, Model: "m",
		Messages: []broker.Message{{Role: broker.RoleSystem, Content: "ab"}, {Role: broker.RoleUser, Content: "çd"}}}

	r := base
	r.AllowedModels = []string{"other", "m2"}
	if _, err := c.Chat(t.Context(), &r); !errors.Is(err, broker.ErrModelNotAllowed) {
		t.Errorf("model outside the allowed list: %v", err)
	}
	r = base
	r.MaxInputChars = 3
	if _, err := c.Chat(t.Context(), &r); !errors.Is(err, broker.ErrInputTooLong) || !strings.Contains(err.Error(), "4 characters > 3") {
		t.Errorf("input over the limit: %v", err)
	}
	if n := len(p.requests()); n != 0 || keys.reads.Load() != 0 {
		t.Fatalf("refused calls reached the provider (%d) or the keychain (%d)", n, keys.reads.Load())
	}

	r = base
	r.MaxInputChars = 4 // exactly the input: allowed
	r.MaxOutputChars = 7
	resp, err := c.Chat(t.Context(), &r)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "Hello w" || resp.Usage.OutputChars != 7 || resp.Usage.InputChars != 4 {
		t.Errorf("cut reply %+v", resp)
	}
	r.MaxOutputChars = 8 // the cut falls after a two-byte character
	if resp, err = c.Chat(t.Context(), &r); err != nil || resp.Message.Content != "Hello wö" || resp.Usage.OutputChars != 8 {
		t.Errorf("cut reply %+v, %v", resp, err)
	}
}

func TestInvalidRequests(t *testing.T) {
	keys := keysFor("p", testKey)
	c := connect(t, keys.get)
	user := []broker.Message{{Role: broker.RoleUser, Content: "x"}}
	cases := map[string]broker.ChatRequest{
		"bad provider name":  {Provider: "P!", API: "openai", Model: "m", Messages: user},
		"unknown api":        {Provider: "p", API: "gemini", Model: "m", Messages: user},
		"plain http remote":  {Provider: "p", API: "openai", BaseURL: "http://example.com/v1", Model: "m", Messages: user},
		"no model":           {Provider: "p", API: "openai", Messages: user},
		"model with space":   {Provider: "p", API: "openai", Model: "a b", Messages: user},
		"no messages":        {Provider: "p", API: "openai", Model: "m"},
		"bad role":           {Provider: "p", API: "openai", Model: "m", Messages: []broker.Message{{Role: "tool", Content: "x"}}},
		"negative input":     {Provider: "p", API: "openai", Model: "m", Messages: user, MaxInputChars: -1},
		"anthropic only sys": {Provider: "p", API: "anthropic", BaseURL: "http://127.0.0.1:1", Model: "m", Messages: []broker.Message{{Role: "system", Content: "x"}}},
	}
	for name, r := range cases {
		if _, err := c.Chat(t.Context(), &r); !errors.Is(err, broker.ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
		}
	}
	// gRPC refuses invalid UTF-8 on the wire already; the broker checks too.
	_, _, err := check(&broker.ChatRequest{Provider: "p", API: "openai", Model: "m", Messages: []broker.Message{{Role: "user", Content: "\xff"}}})
	if !errors.Is(err, broker.ErrInvalidRequest) {
		t.Errorf("invalid UTF-8: %v", err)
	}
	if n := keys.reads.Load(); n != 0 {
		t.Errorf("invalid requests read the keychain %d times", n)
	}
}

func TestCredentialsMissing(t *testing.T) {
	p := newProvider(t, provider.OpenAI)
	req := &broker.ChatRequest{Provider: "nokey", API: provider.OpenAI, BaseURL: p.URL, Model: "m",
		Messages: []broker.Message{{Role: broker.RoleUser, Content: "x"}}}
	_, err := connect(t, keysFor("other", testKey).get).Chat(t.Context(), req)
	if !errors.Is(err, broker.ErrCredentialsMissing) || !strings.Contains(err.Error(), "agentnode auth set nokey") {
		t.Errorf("no stored key: %v", err)
	}
	_, err = connect(t, keysFor("nokey", "two\nlines").get).Chat(t.Context(), req)
	if !errors.Is(err, broker.ErrCredentialsMissing) || strings.Contains(err.Error(), "two") {
		t.Errorf("unusable stored key: %v", err)
	}
	// The real keychain reader with no session bus at all.
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	if err := sessionBus(); err == nil {
		t.Skip("this machine has a /run/user session bus")
	}
	_, err = connect(t, keychainGet).Chat(t.Context(), req)
	if !errors.Is(err, broker.ErrCredentialsMissing) || !strings.Contains(err.Error(), "no D-Bus session bus") {
		t.Errorf("no session bus: %v", err)
	}
	// ... and with a session bus address where nothing listens.
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+filepath.Join(t.TempDir(), "no-bus"))
	_, err = connect(t, keychainGet).Chat(t.Context(), req)
	if !errors.Is(err, broker.ErrCredentialsMissing) {
		t.Errorf("dead session bus: %v", err)
	}
	if n := len(p.requests()); n != 0 {
		t.Fatalf("the provider got %d requests without a key", n)
	}
}

// TestKeychainHangHonoursDeadline: a keychain that never answers does not
// hold the call past its deadline.
func TestKeychainHangHonoursDeadline(t *testing.T) {
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	c := connect(t, func(string, string) (string, error) { <-block; return "", errNoKey })
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	// The keychain blocks until the test ends: an error at all is the proof
	// that the deadline, not the keychain, ended the call.
	_, err := c.Chat(ctx, &broker.ChatRequest{Provider: "openai", Model: "m",
		Messages: []broker.Message{{Role: broker.RoleUser, Content: "x"}}})
	if err == nil {
		t.Fatal("Chat succeeded with a keychain that never answers")
	}
}

// TestKeyCache: one keychain read serves later calls; a rejected key and an
// expired entry are read again.
func TestKeyCache(t *testing.T) {
	p := newProvider(t, provider.OpenAI)
	keys := keysFor("p", testKey)
	b := newBroker(nil, keys.get)
	now := time.Now()
	b.keys.now = func() time.Time { return now }
	c := brokertest.Connect(t, info(), b)
	req := &broker.ChatRequest{Provider: "p", API: provider.OpenAI, BaseURL: p.URL, Model: "m",
		Messages: []broker.Message{{Role: broker.RoleUser, Content: "x"}}}
	for range 3 {
		if _, err := c.Chat(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	if n := keys.reads.Load(); n != 1 {
		t.Fatalf("%d keychain reads for 3 calls, want 1", n)
	}
	p.set(http.StatusUnauthorized, "{}")
	if _, err := c.Chat(t.Context(), req); !errors.Is(err, broker.ErrCredentialsRejected) {
		t.Fatal(err)
	}
	p.set(http.StatusOK, `{"choices":[{"message":{"content":"ok"}}]}`)
	if _, err := c.Chat(t.Context(), req); err != nil || keys.reads.Load() != 2 {
		t.Fatalf("after a rejection: %v, %d reads, want 2", err, keys.reads.Load())
	}
	now = now.Add(keyTTL + time.Second)
	if _, err := c.Chat(t.Context(), req); err != nil || keys.reads.Load() != 3 {
		t.Fatalf("after the TTL: %v, %d reads, want 3", err, keys.reads.Load())
	}
}

func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int64
		want string
	}{{"abc", 5, "abc"}, {"abc", 3, "abc"}, {"abc", 2, "ab"}, {"ééé", 2, "éé"}, {"ééé", 3, "ééé"}, {"x", 0, ""}} {
		if got := truncate(c.s, c.n); got != c.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

// TestLogsUsageWithoutContent: the plugin's log (forwarded into the host's)
// records usage, never message content, replies or the key.
func TestLogsUsageWithoutContent(t *testing.T) {
	p := newProvider(t, provider.OpenAI)
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, JSONFormat: true, Output: lockedWriter{&mu, &buf}})
	c := brokertest.Connect(t, info(), newBroker(logger, keysFor("p", testKey).get))
	req := &broker.ChatRequest{Provider: "p", API: provider.OpenAI, BaseURL: p.URL, Model: "m",
		Messages: []broker.Message{{Role: broker.RoleUser, Content: "PROMPT-CONTENT-123"}}}
	if _, err := c.Chat(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	p.set(http.StatusBadRequest, marker)
	if _, err := c.Chat(t.Context(), req); err == nil {
		t.Fatal("want an error")
	}
	mu.Lock()
	log := buf.String()
	mu.Unlock()
	if !strings.Contains(log, `"input_chars":18`) || !strings.Contains(log, `"output_tokens":2`) || !strings.Contains(log, "llm call failed") {
		t.Errorf("log lacks usage or the failure:\n%s", log)
	}
	for _, s := range []string{"PROMPT-CONTENT", "Hello", testKey, marker} {
		if strings.Contains(log, s) {
			t.Errorf("log contains %q:\n%s", s, log)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
