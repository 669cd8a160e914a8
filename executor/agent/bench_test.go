package agent

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/plugincat"
	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/keychain"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/test/keychaintest"
)

const benchReply = `{"id":"c","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"pong"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`

// benchProvider is a local OpenAI-compatible provider that answers only
// the right key.
func benchProvider(b *testing.B, key string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Header.Get("Authorization") != "Bearer "+key || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, benchReply)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkAgentLLMCall measures one call_llm round trip as the agent
// sees it — a request line in, the reply line out: parse, LLM ceilings,
// Guard, the durable llm_call record, the broker plugin (gRPC, key from the
// real OS keychain, HTTP to a local provider), the durable llm_usage
// record — against the raw thing it wraps: the same HTTP call made
// directly to the same provider. Needs the Secret Service (run through
// test/keyring.sh).
func BenchmarkAgentLLMCall(b *testing.B) {
	keychaintest.Require(b)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	name := "bench-" + hex.EncodeToString(rnd[:4])
	key := "sk-bench-" + hex.EncodeToString(rnd[:])
	if err := keychain.Set("agentnode:"+name, "token", key); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = keychain.Delete("agentnode:"+name, "token") })
	srv := benchProvider(b, key)

	bin := b.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "agentnode-broker-llm"), "github.com/agentnode/agentnode/plugins/broker/llm")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build the broker plugin: %v\n%s", err, out)
	}
	st := agentState(b, testAgentManifest(), func(c *config.Config) {
		c.AgentSandbox.LLM.Enabled = true
		c.AgentSandbox.LLM.MaxCalls = 1_000_000
		c.LLM.Providers = map[string]config.Provider{name: {API: "openai", BaseURL: srv.URL + "/v1"}}
		c.Guard.ToolOverrides = map[string]config.ToolOverride{"test-agent/call_llm": {Decision: "allow"}} // root escalation
	})
	if _, err := plugincat.PinBundled(st.dir, bin); err != nil {
		b.Fatal(err)
	}
	st.plugins = pluginhost.New(pluginhost.Options{HomeDir: st.dir, BinDir: bin})
	b.Cleanup(st.plugins.Close)

	line := `{"id":1,"type":"call_llm","model":"m","messages":[{"role":"user","content":"ping"}]}`
	body := `{"model":"m","messages":[{"role":"user","content":"ping"}]}`

	b.Run("kernel", func(b *testing.B) {
		a := startSession(b, st)
		if rep := a.send(line); rep["ok"] != true { // start the plugin, read the key
			b.Fatalf("warm-up: %v", rep)
		}
		for b.Loop() {
			if rep := a.send(line); rep["ok"] != true {
				b.Fatalf("reply %v", rep)
			}
		}
	})
	b.Run("direct_http", func(b *testing.B) {
		client := &http.Client{}
		call := func() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
		call()
		for b.Loop() {
			call()
		}
	})
}
