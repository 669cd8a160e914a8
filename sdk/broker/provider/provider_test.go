package provider

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	cases := []struct {
		name, api, base string
		want            Endpoint
		chat, models    string
	}{
		{"openai", "", "", Endpoint{"openai", OpenAI, "https://api.openai.com/v1"},
			"https://api.openai.com/v1/chat/completions", "https://api.openai.com/v1/models"},
		{"anthropic", "", "", Endpoint{"anthropic", Anthropic, "https://api.anthropic.com"},
			"https://api.anthropic.com/v1/messages", "https://api.anthropic.com/v1/models"},
		{"local", "openai", "http://localhost:11434/v1/", Endpoint{"local", OpenAI, "http://localhost:11434/v1"},
			"http://localhost:11434/v1/chat/completions", "http://localhost:11434/v1/models"},
		{"proxy_1", "anthropic", "https://llm.example.com/anthropic", Endpoint{"proxy_1", Anthropic, "https://llm.example.com/anthropic"},
			"https://llm.example.com/anthropic/v1/messages", "https://llm.example.com/anthropic/v1/models"},
		{"v6", "openai", "http://[::1]:8080/v1", Endpoint{"v6", OpenAI, "http://[::1]:8080/v1"},
			"http://[::1]:8080/v1/chat/completions", "http://[::1]:8080/v1/models"},
		// An explicit api wins over the name.
		{"openai", "anthropic", "", Endpoint{"openai", Anthropic, "https://api.anthropic.com"},
			"https://api.anthropic.com/v1/messages", "https://api.anthropic.com/v1/models"},
	}
	for _, c := range cases {
		got, err := Resolve(c.name, c.api, c.base)
		if err != nil || got != c.want {
			t.Errorf("Resolve(%q, %q, %q) = %+v, %v; want %+v", c.name, c.api, c.base, got, err, c.want)
			continue
		}
		if got.ChatURL() != c.chat || got.ModelsURL() != c.models {
			t.Errorf("%+v: chat %s models %s", got, got.ChatURL(), got.ModelsURL())
		}
	}
}

func TestResolveRefuses(t *testing.T) {
	cases := []struct{ name, api, base, want string }{
		{"", "openai", "", "provider name is not valid"},
		{"Bad", "openai", "", "provider name is not valid"},
		{"sk-SECRET-looking", "openai", "", "provider name is not valid"},
		{"local", "", "", "no api given"},
		{"local", "gemini", "", `unknown api "gemini"`},
		{"local", "openai", "http://example.com/v1", "plain http only to localhost"},
		{"local", "openai", "http://10.0.0.1/v1", "plain http only to localhost"},
		{"local", "openai", "ftp://example.com", `scheme "ftp"`},
		{"local", "openai", "https://user:pw-SECRET@example.com", "user info"},
		{"local", "openai", "https://example.com/v1?key=SECRET", "query"},
		{"local", "openai", "https://example.com/v1#SECRET", "query or fragment"},
		{"local", "openai", "https:///v1", "with a host"},
		{"local", "openai", "/v1", "with a host"},
		{"local", "openai", "http://localhost:1/%zz", "not a URL"},
	}
	for _, c := range cases {
		_, err := Resolve(c.name, c.api, c.base)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Resolve(%q, %q, %q) = %v, want %q", c.name, c.api, c.base, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("error %q echoes a secret-looking part of the input", err)
		}
	}
}

func TestAuthorize(t *testing.T) {
	h := http.Header{}
	Endpoint{API: OpenAI}.Authorize(h, "k1")
	if len(h) != 1 || h.Get("Authorization") != "Bearer k1" {
		t.Errorf("openai headers %v", h)
	}
	h = http.Header{}
	Endpoint{API: Anthropic}.Authorize(h, "k2")
	if len(h) != 2 || h.Get("x-api-key") != "k2" || h.Get("anthropic-version") != AnthropicVersion {
		t.Errorf("anthropic headers %v", h)
	}
}

func TestValidSecretAndName(t *testing.T) {
	for _, s := range []string{"sk-abc", "A_b.c~d/e+f=", strings.Repeat("x", 500)} {
		if !ValidSecret(s) {
			t.Errorf("ValidSecret(%q) = false", s)
		}
	}
	for _, s := range []string{"", "a b", "a\nb", "a\rb", "a\tb", "é", "a\x7f"} {
		if ValidSecret(s) {
			t.Errorf("ValidSecret(%q) = true", s)
		}
	}
	for _, s := range []string{"openai", "local-llm", "my_proxy", "0", strings.Repeat("a", 64)} {
		if !ValidName(s) {
			t.Errorf("ValidName(%q) = false", s)
		}
	}
	for _, s := range []string{"", "-x", "_x", "A", "a.b", "a/b", "../x", strings.Repeat("a", 65)} {
		if ValidName(s) {
			t.Errorf("ValidName(%q) = true", s)
		}
	}
	if KeychainService("openai") != "agentnode:openai" || KeychainUser != "token" {
		t.Error("keychain naming changed: it is part of the user-facing contract")
	}
}
