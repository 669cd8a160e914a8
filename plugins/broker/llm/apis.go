package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentnode/agentnode/sdk/broker"
	"github.com/agentnode/agentnode/sdk/broker/provider"
)

// The OpenAI chat completions wire format (the subset used here; local
// OpenAI-compatible servers speak the same).
type (
	openAIMessage struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	openAIRequest struct {
		Model    string          `json:"model"`
		Messages []openAIMessage `json:"messages"`
	}
	openAIResponse struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
)

// openAI makes one chat completion. The output bound is applied by the
// caller on the reply: token limits differ between models and servers
// (max_tokens, max_completion_tokens), characters do not.
func (b *llmBroker) openAI(ctx context.Context, ep provider.Endpoint, key string, req *broker.ChatRequest) (*broker.ChatResponse, error) {
	body := openAIRequest{Model: req.Model, Messages: make([]openAIMessage, len(req.Messages))}
	for i, m := range req.Messages {
		body.Messages[i] = openAIMessage{Role: m.Role, Content: m.Content}
	}
	var out openAIResponse
	if err := b.post(ctx, ep, key, body, &out); err != nil {
		return nil, err
	}
	if len(out.Choices) == 0 {
		return nil, fmt.Errorf("%w: provider %s: the reply has no choices", broker.ErrProviderFailed, ep.Name)
	}
	var content string
	if c := out.Choices[0].Message.Content; c != nil {
		content = *c
	}
	return &broker.ChatResponse{
		Message: broker.Message{Role: broker.RoleAssistant, Content: content},
		Usage:   broker.Usage{InputTokens: out.Usage.PromptTokens, OutputTokens: out.Usage.CompletionTokens},
	}, nil
}

// The Anthropic messages wire format (the subset used here).
type (
	anthropicMessage struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	anthropicRequest struct {
		Model     string             `json:"model"`
		MaxTokens int64              `json:"max_tokens"`
		System    string             `json:"system,omitempty"`
		Messages  []anthropicMessage `json:"messages"`
	}
	anthropicResponse struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Usage struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	}
)

// anthropic makes one messages call. System messages become the top-level
// system prompt. max_tokens, which the API requires, is the output bound in
// characters when that is smaller than defaultMaxTokens: most tokens are one
// character or more, so this bounds the cost without cutting most replies
// short of the character bound (characters that take several tokens, as
// some CJK characters and emoji do, can end a reply earlier).
func (b *llmBroker) anthropic(ctx context.Context, ep provider.Endpoint, key string, req *broker.ChatRequest) (*broker.ChatResponse, error) {
	body := anthropicRequest{Model: req.Model, MaxTokens: defaultMaxTokens}
	if req.MaxOutputChars > 0 && req.MaxOutputChars < defaultMaxTokens {
		body.MaxTokens = req.MaxOutputChars
	}
	var system []string
	for _, m := range req.Messages {
		if m.Role == broker.RoleSystem {
			system = append(system, m.Content)
			continue
		}
		body.Messages = append(body.Messages, anthropicMessage{Role: m.Role, Content: m.Content})
	}
	body.System = strings.Join(system, "\n\n")
	var out anthropicResponse
	if err := b.post(ctx, ep, key, body, &out); err != nil {
		return nil, err
	}
	var text strings.Builder
	for _, c := range out.Content {
		if c.Type == "text" {
			text.WriteString(c.Text)
		}
	}
	return &broker.ChatResponse{
		Message: broker.Message{Role: broker.RoleAssistant, Content: text.String()},
		Usage:   broker.Usage{InputTokens: out.Usage.InputTokens, OutputTokens: out.Usage.OutputTokens},
	}, nil
}
