package test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/rogpeppe/go-internal/testscript"
)

// llmServer is a real local OpenAI-compatible provider for the scripts: it
// answers POST /v1/chat/completions with a canned reply when the request
// carries exactly the stored key, and counts what it saw. It asserts the
// key arrives only in the Authorization header (never in the body).
type llmServer struct {
	key  string
	srv  *http.Server
	mu   sync.Mutex
	ok   int // authorised chat calls
	bad  int // requests with a missing or wrong key
	leak int // requests whose body contained the key
}

var (
	llmServersMu sync.Mutex
	llmServers   = map[*testscript.TestScript]*llmServer{}
)

func (s *llmServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.Contains(string(body), s.key) || strings.Contains(r.URL.String(), s.key) {
		s.leak++
	}
	if r.Header.Get("Authorization") != "Bearer "+s.key {
		s.bad++
		http.Error(w, `{"error":{"message":"invalid api key"}}`, http.StatusUnauthorized)
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		_, _ = io.WriteString(w, `{"data":[{"id":"e2e-model"}]}`)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		s.ok++
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": fmt.Sprintf("chat-%d", s.ok),
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": fmt.Sprintf("pong %d", s.ok)}}},
			"usage": map[string]any{"prompt_tokens": 3, "completion_tokens": 2},
		})
	default:
		http.NotFound(w, r)
	}
}

// cmdLLMServer drives a script's local provider:
//
//	llmserver start KEYVAR   serve on 127.0.0.1 with the key in $KEYVAR; sets $LLM_BASE_URL (…/v1)
//	llmserver calls N        exactly N authorised chat calls, no request with a wrong key or a key in its body
func cmdLLMServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: llmserver start KEYVAR | llmserver calls N")
	}
	llmServersMu.Lock()
	s := llmServers[ts]
	llmServersMu.Unlock()
	switch args[0] {
	case "start":
		if s != nil {
			ts.Fatalf("llmserver: already started")
		}
		key := ts.Getenv(args[1])
		if key == "" {
			ts.Fatalf("llmserver: $%s is empty", args[1])
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			ts.Fatalf("llmserver: %v", err)
		}
		s = &llmServer{key: key}
		s.srv = &http.Server{Handler: s}
		go func() { _ = s.srv.Serve(ln) }()
		llmServersMu.Lock()
		llmServers[ts] = s
		llmServersMu.Unlock()
		ts.Defer(func() {
			_ = s.srv.Close()
			llmServersMu.Lock()
			delete(llmServers, ts)
			llmServersMu.Unlock()
		})
		ts.Setenv("LLM_BASE_URL", "http://"+ln.Addr().String()+"/v1")
	case "calls":
		if s == nil {
			ts.Fatalf("llmserver: not started")
		}
		want, err := strconv.Atoi(args[1])
		if err != nil {
			ts.Fatalf("llmserver: bad count %q", args[1])
		}
		s.mu.Lock()
		ok, bad, leak := s.ok, s.bad, s.leak
		s.mu.Unlock()
		if ok != want || bad != 0 || leak != 0 {
			ts.Fatalf("llmserver: %d authorised calls (want %d), %d with a wrong or missing key, %d with the key in the body", ok, want, bad, leak)
		}
	default:
		ts.Fatalf("llmserver: unknown subcommand %q", args[0])
	}
}

// buildStatic builds the main package in dir as a static binary
// (CGO_ENABLED=0) at out.
func buildStatic(out, dir string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stderr = os.Stderr
	return cmd.Run()
}
