// Package provider holds the conventions shared by everything that talks to
// an LLM provider on agentnode's behalf — the bundled broker plugin and the
// `agentnode auth` command: provider names, where the credential lives in
// the OS keychain, the two wire APIs, their official endpoints, URL layout
// and authentication headers.
//
// Base URLs follow each provider's own SDK: an OpenAI-compatible base URL
// ends with the API version ("https://api.openai.com/v1",
// "http://localhost:11434/v1"), an Anthropic one does not
// ("https://api.anthropic.com"). A base URL is https, or plain http to the
// loopback interface only, so that a credential never crosses a network in
// the clear.
package provider

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"syscall"
)

// The wire APIs.
const (
	OpenAI    = "openai"    // OpenAI-compatible: POST {base}/chat/completions, Bearer token
	Anthropic = "anthropic" // Anthropic: POST {base}/v1/messages, x-api-key
)

// AnthropicVersion is the anthropic-version header sent with every
// Anthropic request.
const AnthropicVersion = "2023-06-01"

// KeychainUser is the keychain user of every provider credential.
const KeychainUser = "token"

// KeychainService is the keychain service of provider name's credential:
// "agentnode:<name>".
func KeychainService(name string) string { return "agentnode:" + name }

// WellKnown are the providers usable without an llm.providers entry: their
// name is their API and they use the official endpoint.
var WellKnown = []string{OpenAI, Anthropic}

// officialBase is the official base URL of each API.
var officialBase = map[string]string{
	OpenAI:    "https://api.openai.com/v1",
	Anthropic: "https://api.anthropic.com",
}

// namePattern is the pattern of llm.providers keys in config.json.
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// NamePattern is namePattern's source, for messages.
const NamePattern = `^[a-z0-9][a-z0-9_-]{0,63}$`

// ValidName reports whether name is a valid provider name.
func ValidName(name string) bool { return namePattern.MatchString(name) }

// ErrInvalid is wrapped by every error of Resolve.
var ErrInvalid = errors.New("invalid provider")

// Endpoint is a resolved provider: its API and base URL, without a trailing
// slash.
type Endpoint struct {
	Name    string
	API     string
	BaseURL string
}

// Resolve checks a provider and fills the defaults: an empty api is the
// name when that is a well-known provider; an empty baseURL is the API's
// official endpoint. Errors wrap ErrInvalid and never echo baseURL's query
// or user info.
func Resolve(name, api, baseURL string) (Endpoint, error) {
	if !ValidName(name) {
		return Endpoint{}, fmt.Errorf("%w: provider name is not valid (want %s)", ErrInvalid, NamePattern)
	}
	if api == "" && (name == OpenAI || name == Anthropic) {
		api = name
	}
	official, ok := officialBase[api]
	switch {
	case api == "":
		return Endpoint{}, fmt.Errorf("%w: provider %q: no api given (set llm.providers.%s.api to openai or anthropic)", ErrInvalid, name, name)
	case !ok:
		return Endpoint{}, fmt.Errorf("%w: provider %q: unknown api %q (want openai or anthropic)", ErrInvalid, name, api)
	}
	if baseURL == "" {
		return Endpoint{Name: name, API: api, BaseURL: official}, nil
	}
	if err := checkBaseURL(baseURL); err != nil {
		return Endpoint{}, fmt.Errorf("%w: provider %q: base_url %w", ErrInvalid, name, err)
	}
	return Endpoint{Name: name, API: api, BaseURL: strings.TrimRight(baseURL, "/")}, nil
}

// checkBaseURL accepts https URLs and http URLs to the loopback interface,
// without user info, query or fragment.
func checkBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("is not a URL")
	}
	switch {
	case u.User != nil:
		return errors.New("must not contain user info")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return errors.New("must not contain a query or fragment")
	case u.Opaque != "" || u.Host == "":
		return errors.New("must be an absolute http(s) URL with a host")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		switch u.Hostname() {
		case "localhost", "127.0.0.1", "::1":
			return nil
		}
		return errors.New("may use plain http only to localhost, 127.0.0.1 or [::1]; use https")
	}
	return fmt.Errorf("has scheme %q, want https", u.Scheme)
}

// ChatURL is where chat requests go.
func (e Endpoint) ChatURL() string {
	if e.API == Anthropic {
		return e.BaseURL + "/v1/messages"
	}
	return e.BaseURL + "/chat/completions"
}

// ModelsURL lists the models; a cheap authenticated request to check a
// credential.
func (e Endpoint) ModelsURL() string {
	if e.API == Anthropic {
		return e.BaseURL + "/v1/models"
	}
	return e.BaseURL + "/models"
}

// Authorize sets the authentication headers of API on h.
func (e Endpoint) Authorize(h http.Header, key string) {
	if e.API == Anthropic {
		h.Set("x-api-key", key)
		h.Set("anthropic-version", AnthropicVersion)
		return
	}
	h.Set("Authorization", "Bearer "+key)
}

// ValidSecret reports whether s can be stored and sent as a credential: not
// empty, printable ASCII without spaces (it travels in an HTTP header).
func ValidSecret(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// TransportFailure describes why an HTTP exchange with a provider failed,
// for messages. Only known kinds of failure are described: other transport
// errors may quote what the server sent (Go's "malformed HTTP response
// ..."), and a provider's text is never repeated.
func TransportFailure(err error) string {
	var (
		dnsErr  *net.DNSError
		opErr   *net.OpError
		certErr *tls.CertificateVerificationError
		timeout interface{ Timeout() bool }
	)
	switch {
	case errors.As(err, &timeout) && timeout.Timeout():
		return "it did not answer in time"
	case errors.As(err, &dnsErr):
		return "cannot resolve its host name"
	case errors.As(err, &certErr):
		return "its TLS certificate is not trusted"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return "cannot connect (" + errno.Error() + ")"
		}
		return "cannot connect"
	}
	return "the connection failed"
}

// NoRedirect is an http.Client CheckRedirect that follows no redirect: a
// redirect could carry the credential header to another host.
func NoRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
