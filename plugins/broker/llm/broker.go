package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/agentnode/agentnode/sdk/broker"
	"github.com/agentnode/agentnode/sdk/broker/provider"
)

// Limits of one provider call.
const (
	// maxReplyBytes caps a provider's response body.
	maxReplyBytes = 8 << 20
	// callTimeout caps one provider call even when the kernel's deadline
	// is longer.
	callTimeout = 5 * time.Minute
	// defaultMaxTokens is the max_tokens of an Anthropic request (the API
	// requires one) when the caller sets no smaller output bound.
	defaultMaxTokens = 4096
)

// llmBroker implements broker.Broker for OpenAI-compatible and Anthropic
// providers.
type llmBroker struct {
	client *http.Client
	keys   *keyCache
	logger hclog.Logger
}

var _ broker.Broker = (*llmBroker)(nil)

func newBroker(logger hclog.Logger, get keyGetter) *llmBroker {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	tr := &http.Transport{
		// The plugin gets no environment, so there is no proxy to honour;
		// say so explicitly.
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConns:          16,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &llmBroker{
		client: &http.Client{Transport: tr, Timeout: callTimeout, CheckRedirect: provider.NoRedirect},
		keys:   newKeyCache(get),
		logger: logger,
	}
}

// Chat checks the request against its ceilings, reads the credential and
// calls the provider.
func (b *llmBroker) Chat(ctx context.Context, req *broker.ChatRequest) (*broker.ChatResponse, error) {
	if req == nil {
		return nil, fmt.Errorf("%w: no request", broker.ErrInvalidRequest)
	}
	ep, inChars, err := check(req)
	if err != nil {
		return nil, err
	}
	key, err := b.keys.key(ctx, ep.Name)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var resp *broker.ChatResponse
	if ep.API == provider.Anthropic {
		resp, err = b.anthropic(ctx, ep, key, req)
	} else {
		resp, err = b.openAI(ctx, ep, key, req)
	}
	if errors.Is(err, broker.ErrCredentialsRejected) {
		b.keys.forget(ep.Name)
	}
	if err != nil {
		b.logger.Info("llm call failed", "provider", ep.Name, "api", ep.API, "model", req.Model,
			"duration_ms", time.Since(start).Milliseconds(), "error", err.Error())
		return nil, err
	}
	resp.Message.Role = broker.RoleAssistant
	if req.MaxOutputChars > 0 {
		resp.Message.Content = truncate(resp.Message.Content, req.MaxOutputChars)
	}
	resp.Usage.InputChars = inChars
	resp.Usage.OutputChars = int64(utf8.RuneCountInString(resp.Message.Content))
	b.logger.Info("llm call", "provider", ep.Name, "api", ep.API, "model", req.Model,
		"input_chars", resp.Usage.InputChars, "output_chars", resp.Usage.OutputChars,
		"input_tokens", resp.Usage.InputTokens, "output_tokens", resp.Usage.OutputTokens,
		"duration_ms", time.Since(start).Milliseconds())
	return resp, nil
}

// check validates req and its ceilings before anything is read or sent. It
// returns the resolved provider and the input size in characters.
func check(req *broker.ChatRequest) (provider.Endpoint, int64, error) {
	ep, err := provider.Resolve(req.Provider, req.API, req.BaseURL)
	if err != nil {
		return ep, 0, fmt.Errorf("%w: %w", broker.ErrInvalidRequest, err)
	}
	switch {
	case req.MaxOutputChars < 0 || req.MaxInputChars < 0:
		return ep, 0, fmt.Errorf("%w: negative character limit", broker.ErrInvalidRequest)
	case req.Model == "" || strings.ContainsFunc(req.Model, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return ep, 0, fmt.Errorf("%w: the model name is empty or contains whitespace", broker.ErrInvalidRequest)
	case len(req.AllowedModels) > 0 && !slices.Contains(req.AllowedModels, req.Model):
		return ep, 0, fmt.Errorf("%w: model %q is not among the allowed models", broker.ErrModelNotAllowed, req.Model)
	case len(req.Messages) == 0:
		return ep, 0, fmt.Errorf("%w: no messages", broker.ErrInvalidRequest)
	}
	var in int64
	for i, m := range req.Messages {
		switch m.Role {
		case broker.RoleSystem, broker.RoleUser, broker.RoleAssistant:
		default:
			return ep, 0, fmt.Errorf("%w: message %d has role %q (want system, user or assistant)", broker.ErrInvalidRequest, i, m.Role)
		}
		if !utf8.ValidString(m.Content) {
			return ep, 0, fmt.Errorf("%w: message %d is not valid UTF-8", broker.ErrInvalidRequest, i)
		}
		in += int64(utf8.RuneCountInString(m.Content))
	}
	if ep.API == provider.Anthropic && !slices.ContainsFunc(req.Messages, func(m broker.Message) bool { return m.Role != broker.RoleSystem }) {
		return ep, 0, fmt.Errorf("%w: an Anthropic call needs at least one user or assistant message", broker.ErrInvalidRequest)
	}
	if req.MaxInputChars > 0 && in > req.MaxInputChars {
		return ep, 0, fmt.Errorf("%w: %d characters > %d", broker.ErrInputTooLong, in, req.MaxInputChars)
	}
	return ep, in, nil
}

// truncate cuts s to at most n characters.
func truncate(s string, n int64) string {
	if int64(len(s)) <= n { // bytes ≥ characters
		return s
	}
	var count int64
	for i := range s {
		if count == n {
			return s[:i]
		}
		count++
	}
	return s
}

// post sends body as JSON to ep and decodes a 2xx reply into out. Errors
// name the provider and, for HTTP errors, the status; they never contain
// the credential, the request or the provider's response text.
func (b *llmBroker) post(ctx context.Context, ep provider.Endpoint, key string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("%w: encode request: %w", broker.ErrInvalidRequest, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.ChatURL(), bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: provider %s: cannot build the request", broker.ErrInvalidRequest, ep.Name)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	ep.Authorize(hreq.Header, key)
	hresp, err := b.client.Do(hreq)
	if err != nil {
		return transportError(ctx, ep, err)
	}
	defer hresp.Body.Close()
	if err := statusError(ep, hresp.StatusCode); err != nil {
		// Drain a little so the connection can be reused; never read it.
		_, _ = io.CopyN(io.Discard, hresp.Body, 64<<10)
		return err
	}
	raw, err := io.ReadAll(io.LimitReader(hresp.Body, maxReplyBytes+1))
	if err != nil {
		return transportError(ctx, ep, err)
	}
	if len(raw) > maxReplyBytes {
		return fmt.Errorf("%w: provider %s: the reply is larger than %d bytes", broker.ErrProviderFailed, ep.Name, maxReplyBytes)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		// json's message may quote the reply: leave it out.
		return fmt.Errorf("%w: provider %s: the reply is not a valid %s response", broker.ErrProviderFailed, ep.Name, ep.API)
	}
	return nil
}

// statusError maps an HTTP status to a generic error, or nil for 2xx.
func statusError(ep provider.Endpoint, code int) error {
	switch {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fmt.Errorf("%w: provider %s refused the stored token (HTTP %d); check it with `agentnode auth test %s`",
			broker.ErrCredentialsRejected, ep.Name, code, ep.Name)
	case code == http.StatusTooManyRequests:
		return fmt.Errorf("%w: provider %s is rate limiting or out of quota (HTTP %d)", broker.ErrProviderFailed, ep.Name, code)
	case code == http.StatusNotFound:
		return fmt.Errorf("%w: provider %s: not found (HTTP 404); check the model name and base_url", broker.ErrProviderFailed, ep.Name)
	case code >= 500:
		return fmt.Errorf("%w: provider %s is unavailable (HTTP %d)", broker.ErrProviderFailed, ep.Name, code)
	case code >= 400:
		return fmt.Errorf("%w: provider %s rejected the request (HTTP %d)", broker.ErrProviderFailed, ep.Name, code)
	case code >= 300:
		return fmt.Errorf("%w: provider %s answered with a redirect (HTTP %d), which the broker does not follow; check base_url",
			broker.ErrProviderFailed, ep.Name, code)
	}
	return fmt.Errorf("%w: provider %s: unexpected HTTP status %d", broker.ErrProviderFailed, ep.Name, code)
}

// transportError describes a failed exchange without anything the server
// sent.
func transportError(ctx context.Context, ep provider.Endpoint, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("provider %s: %w", ep.Name, ctx.Err())
	}
	return fmt.Errorf("%w: provider %s is unreachable: %s", broker.ErrProviderFailed, ep.Name, provider.TransportFailure(err))
}
