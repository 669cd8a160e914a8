package main

// The built plugin binary, started by the kernel's plugin host (pinned,
// no host environment but the session bus), reading its credentials from a
// real OS keychain, calling real local HTTP servers. Run with
//
//	AGENTNODE_REQUIRE_KEYRING=1 test/keyring.sh go test ./plugins/broker/llm/
//	test/keyring.sh go test -run '^$' -bench . ./plugins/broker/llm/
//
// Without a keychain the keychain tests skip, unless
// AGENTNODE_REQUIRE_KEYRING=1, in which case they fail.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/agentnode/agentnode/cmd/agentnode/plugincat"
	"github.com/agentnode/agentnode/kernel/keychain"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/sdk/broker"
	"github.com/agentnode/agentnode/sdk/broker/provider"
	"github.com/agentnode/agentnode/test/keychaintest"
)

var built struct {
	once sync.Once
	dir  string
	err  error
	out  []byte
}

// pluginBinary builds agentnode-broker-llm once per test process into a
// directory that outlives single tests (removed by the OS temp cleaner).
func pluginBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a binary")
	}
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "broker-llm-bin-")
		if built.err != nil {
			return
		}
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		cmd := exec.Command(goBin, "build", "-trimpath", "-o", filepath.Join(built.dir, "agentnode-broker-llm"), ".")
		built.out, built.err = cmd.CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("build plugin: %v\n%s", built.err, built.out)
	}
	return built.dir
}

// newHost pins the built plugin in a fresh home and returns a plugin host
// for it.
func newHost(t testing.TB) *pluginhost.Host {
	t.Helper()
	bin := pluginBinary(t)
	home := t.TempDir()
	if _, err := plugincat.Pin(home, filepath.Join(bin, "agentnode-broker-llm")); err != nil {
		t.Fatal(err)
	}
	h := pluginhost.New(pluginhost.Options{HomeDir: home, BinDir: bin, Logger: hclog.NewNullLogger()})
	t.Cleanup(h.Close)
	return h
}

func requireKeyring(t testing.TB) { keychaintest.Require(t) }

// storeKey stores key for a fresh provider name in the real keychain and
// returns the name.
func storeKey(t testing.TB, key string) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := "llmtest-" + hex.EncodeToString(b)
	if err := keychain.Set(provider.KeychainService(name), provider.KeychainUser, key); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = keychain.Delete(provider.KeychainService(name), provider.KeychainUser) })
	return name
}

func TestPluginBinaryWithKeychain(t *testing.T) {
	requireKeyring(t)
	// Keys in the host's environment are never what the broker uses.
	t.Setenv("OPENAI_API_KEY", "sk-from-env-not-used")
	t.Setenv("ANTHROPIC_API_KEY", "sk-from-env-not-used")
	name := storeKey(t, testKey)
	h := newHost(t)
	c, err := h.Broker(t.Context(), "llm")
	if err != nil {
		t.Fatal(err)
	}
	inf, err := c.Info(t.Context())
	if err != nil || inf.Name != "llm" || inf.Kind != "broker" {
		t.Fatalf("info %+v, %v", inf, err)
	}
	for _, api := range []string{provider.OpenAI, provider.Anthropic} {
		p := newProvider(t, api)
		base := p.URL
		if api == provider.OpenAI {
			base += "/v1"
		}
		req := &broker.ChatRequest{Provider: name, API: api, BaseURL: base, Model: "m", MaxOutputChars: 9,
			Messages: []broker.Message{{Role: broker.RoleUser, Content: "hi"}}}
		resp, err := c.Chat(t.Context(), req)
		if err != nil {
			t.Fatalf("%s: %v", api, err)
		}
		if resp.Message.Content != "Hello wör" || resp.Usage.OutputChars != 9 || resp.Usage.InputChars != 2 {
			t.Errorf("%s: response %+v", api, resp)
		}
		reqs := p.requests()
		if len(reqs) != 1 {
			t.Fatalf("%s: provider got %d requests", api, len(reqs))
		}
		assertKeyOnlyIn(t, reqs[0], api)

		// A hostile provider: rejected key, body with a marker and the key.
		p.set(http.StatusUnauthorized, marker+" "+testKey)
		_, err = c.Chat(t.Context(), req)
		if !errors.Is(err, broker.ErrCredentialsRejected) || strings.Contains(err.Error(), marker) || strings.Contains(err.Error(), testKey) {
			t.Errorf("%s: rejected: %v", api, err)
		}
	}

	// A provider with nothing stored.
	_, err = c.Chat(t.Context(), &broker.ChatRequest{Provider: name + "-none", API: provider.OpenAI,
		BaseURL: "http://127.0.0.1:1", Model: "m", Messages: []broker.Message{{Role: broker.RoleUser, Content: "hi"}}})
	if !errors.Is(err, broker.ErrCredentialsMissing) || !strings.Contains(err.Error(), "agentnode auth set "+name+"-none") {
		t.Errorf("nothing stored: %v", err)
	}
}

// TestPluginBinaryNoKeychain: the host's session bus leads nowhere; the
// plugin refuses with credentials missing and calls no provider.
func TestPluginBinaryNoKeychain(t *testing.T) {
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+filepath.Join(t.TempDir(), "no-bus"))
	p := newProvider(t, provider.OpenAI)
	c, err := newHost(t).Broker(t.Context(), "llm")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Chat(t.Context(), &broker.ChatRequest{Provider: "openai", BaseURL: p.URL, Model: "m",
		Messages: []broker.Message{{Role: broker.RoleUser, Content: "hi"}}})
	if !errors.Is(err, broker.ErrCredentialsMissing) {
		t.Fatalf("error %v, want ErrCredentialsMissing", err)
	}
	if n := len(p.requests()); n != 0 {
		t.Fatalf("provider got %d requests", n)
	}
}

// Benchmarks: one chat call of a typical small size, answered by the same
// local OpenAI-compatible server, through the kernel's plugin host and the
// plugin process (gRPC over a unix socket with mTLS, then HTTP), and as a
// plain HTTP call from this process. The difference is the broker's
// overhead.

const benchReply = `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",` +
	`"content":"The capital of France is Paris. It has been the capital since the 10th century, with short interruptions."},` +
	`"finish_reason":"stop"}],"usage":{"prompt_tokens":42,"completion_tokens":24,"total_tokens":66}}`

func benchServer(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Header.Get("Authorization") != "Bearer "+testKey {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, benchReply)
	}))
	b.Cleanup(srv.Close)
	return srv
}

var benchMessages = []broker.Message{
	{Role: broker.RoleSystem, Content: "You are a helpful assistant inside a sandboxed agent. Answer briefly and factually."},
	{Role: broker.RoleUser, Content: "What is the capital of France, and since when has it been the capital?"},
}

func BenchmarkBrokerRoundTrip(b *testing.B) {
	requireKeyring(b)
	name := storeKey(b, testKey)
	srv := benchServer(b)
	c, err := newHost(b).Broker(context.Background(), "llm")
	if err != nil {
		b.Fatal(err)
	}
	req := &broker.ChatRequest{Provider: name, API: provider.OpenAI, BaseURL: srv.URL + "/v1", Model: "gpt-4o-mini",
		Messages: benchMessages, MaxInputChars: 24000, MaxOutputChars: 24000, AllowedModels: []string{"gpt-4o-mini"}}
	ctx := context.Background()
	if _, err := c.Chat(ctx, req); err != nil { // start, keychain read, connection
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp, err := c.Chat(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.Usage.OutputTokens != 24 {
			b.Fatalf("usage %+v", resp.Usage)
		}
	}
}

func BenchmarkDirectHTTP(b *testing.B) {
	srv := benchServer(b)
	client := &http.Client{}
	b.Cleanup(client.CloseIdleConnections)
	msgs := make([]openAIMessage, len(benchMessages))
	for i, m := range benchMessages {
		msgs[i] = openAIMessage{Role: m.Role, Content: m.Content}
	}
	call := func() {
		body, err := json.Marshal(openAIRequest{Model: "gpt-4o-mini", Messages: msgs})
		if err != nil {
			b.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		var out openAIResponse
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || out.Usage.CompletionTokens != 24 {
			b.Fatalf("status %d, %v", resp.StatusCode, err)
		}
	}
	call()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		call()
	}
}
