// Package broker is the plugin contract for LLM brokers: host-side model
// calls made on behalf of sandboxed agents. The broker holds the provider
// credentials (from the OS keychain); they never cross into the sandbox or
// into the kernel's requests. The kernel resolves the provider (API kind,
// base URL) from its config and the effective ceilings, and sends them with
// every call; it enforces call budgets. A broker enforces the ceilings of
// each request again (defense in depth), and the Client refuses a reply
// longer than MaxOutputChars.
//
// Errors a broker returns reach the kernel's audit log and the agent: they
// must never carry the credential or the provider's response text. The
// sentinel errors below cross the gRPC boundary as status codes, so that
// errors.Is works on the host side.
package broker

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentnode/agentnode/sdk/plugin"
	pb "github.com/agentnode/agentnode/sdk/proto/agentnodev1"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one chat message.
type Message struct {
	Role    string
	Content string
}

// ChatRequest is one model call.
type ChatRequest struct {
	// Provider names the credential: OS keychain service
	// "agentnode:<Provider>", user "token".
	Provider string
	Model    string
	Messages []Message
	// MaxOutputChars bounds the reply's content, in characters (Unicode code
	// points). Zero means no bound from the caller.
	MaxOutputChars int64
	// API is "openai" (OpenAI-compatible chat completions) or "anthropic"
	// (messages); see sdk/broker/provider. Empty: Provider, when that is
	// one of the two.
	API string
	// BaseURL is the provider's API root, as its SDK takes it
	// ("https://api.openai.com/v1", "https://api.anthropic.com"). Empty:
	// the official endpoint of API.
	BaseURL string
	// MaxInputChars bounds the total content of Messages, in characters.
	// Zero means no bound from the caller.
	MaxInputChars int64
	// AllowedModels lists the models the call may use. Empty means no
	// restriction from the caller; the kernel refuses a call itself when
	// the intersection of the host's and the manifest's lists is empty.
	AllowedModels []string
}

// Usage is what a call consumed. Chars are Unicode code points; tokens are
// as reported by the provider (zero when unknown).
type Usage struct {
	InputChars   int64
	OutputChars  int64
	InputTokens  int64
	OutputTokens int64
}

// ChatResponse is the model's reply.
type ChatResponse struct {
	Message Message
	Usage   Usage
}

// Broker is implemented by LLM broker plugins.
type Broker interface {
	Chat(ctx context.Context, req *ChatRequest) (*ChatResponse, error)
}

// ErrOutputTooLong is returned by Client.Chat when the reply exceeds the
// request's MaxOutputChars.
var ErrOutputTooLong = errors.New("broker reply exceeds max_output_chars")

// Errors a broker returns (wrapped) for the kernel to act on. Each crosses
// the gRPC boundary as its own status code; Client.Chat wraps the matching
// sentinel again.
var (
	// ErrCredentialsMissing: no credential for the provider (nothing stored,
	// or no OS keychain reachable). The kernel's code: credentials_missing.
	ErrCredentialsMissing = errors.New("provider credentials missing")
	// ErrCredentialsRejected: the provider refused the credential (HTTP 401
	// or 403).
	ErrCredentialsRejected = errors.New("provider rejected the credentials")
	// ErrModelNotAllowed: the model is not in AllowedModels.
	ErrModelNotAllowed = errors.New("model not allowed")
	// ErrInputTooLong: the messages exceed MaxInputChars.
	ErrInputTooLong = errors.New("input exceeds max_input_chars")
	// ErrInvalidRequest: the request is malformed (no messages, unknown
	// role or API, bad base URL, ...).
	ErrInvalidRequest = errors.New("invalid broker request")
	// ErrProviderFailed: the provider could not be reached or answered with
	// an error other than a credential rejection.
	ErrProviderFailed = errors.New("provider call failed")
)

// wireErrors maps the sentinels to their gRPC status codes, one each.
var wireErrors = []struct {
	err  error
	code codes.Code
}{
	{ErrCredentialsMissing, codes.Unauthenticated},
	{ErrCredentialsRejected, codes.PermissionDenied},
	{ErrModelNotAllowed, codes.FailedPrecondition},
	{ErrInputTooLong, codes.ResourceExhausted},
	{ErrOutputTooLong, codes.OutOfRange},
	{ErrInvalidRequest, codes.InvalidArgument},
	{ErrProviderFailed, codes.Aborted},
}

// toStatus turns a broker's error into a gRPC status carrying the code of
// the sentinel it wraps. Context errors keep their own codes.
func toStatus(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	for _, w := range wireErrors {
		if errors.Is(err, w.err) {
			return status.Error(w.code, err.Error())
		}
	}
	return err
}

// fromStatus re-attaches the sentinel matching a status code from the
// plugin, so that errors.Is works for the caller.
func fromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, w := range wireErrors {
		if st.Code() == w.code {
			return &wireError{sentinel: w.err, status: err, msg: st.Message()}
		}
	}
	return err
}

// wireError is a sentinel error received from a plugin: its message is the
// plugin's, and it matches both the sentinel and the gRPC status.
type wireError struct {
	sentinel, status error
	msg              string
}

func (e *wireError) Error() string   { return e.msg }
func (e *wireError) Unwrap() []error { return []error{e.sentinel, e.status} }

// GRPCPlugin adapts a Broker to go-plugin. Impl and Info are used on the
// plugin side; the host uses a zero GRPCPlugin.
type GRPCPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl Broker
	Info plugin.Info
}

// GRPCServer registers the Broker service.
func (p *GRPCPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterBrokerServer(s, &server{InfoService: plugin.NewInfoService(plugin.KindBroker, p.Info), impl: p.Impl})
	return nil
}

// GRPCClient returns a *Client.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewClient(c), nil
}

// Serve runs impl as a broker plugin process. See plugin.Serve.
func Serve(info plugin.Info, impl Broker) {
	plugin.Serve(&plugin.ServeConfig{Kind: plugin.KindBroker, Plugin: &GRPCPlugin{Impl: impl, Info: info}})
}

type server struct {
	plugin.InfoService
	unimplemented
	impl Broker
}

// unimplemented keeps the generated defaults one level below
// plugin.InfoService, whose Info answers.
type unimplemented struct{ pb.UnimplementedBrokerServer }

func (s *server) Chat(ctx context.Context, r *pb.ChatRequest) (*pb.ChatResponse, error) {
	req := &ChatRequest{
		Provider: r.GetProvider(), Model: r.GetModel(), MaxOutputChars: r.GetMaxOutputChars(),
		API: r.GetApi(), BaseURL: r.GetBaseUrl(), MaxInputChars: r.GetMaxInputChars(),
		AllowedModels: r.GetAllowedModels(),
	}
	for _, m := range r.GetMessages() {
		req.Messages = append(req.Messages, Message{Role: m.GetRole(), Content: m.GetContent()})
	}
	resp, err := s.impl.Chat(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	if resp == nil {
		return nil, errors.New("broker plugin returned no response")
	}
	u := resp.Usage
	return &pb.ChatResponse{
		Message: &pb.ChatMessage{Role: resp.Message.Role, Content: resp.Message.Content},
		Usage: &pb.Usage{
			InputChars: u.InputChars, OutputChars: u.OutputChars,
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		},
	}, nil
}

// Client is the host side of a broker plugin. It implements Broker.
type Client struct {
	plugin.InfoClient // Info asks the plugin to describe itself.
	c                 pb.BrokerClient
}

var _ Broker = (*Client)(nil)

// NewClient wraps a gRPC connection to a Broker service.
func NewClient(cc grpc.ClientConnInterface) *Client { return newClient(pb.NewBrokerClient(cc)) }

func newClient(c pb.BrokerClient) *Client {
	return &Client{InfoClient: plugin.NewInfoClient(plugin.KindBroker, c), c: c}
}

// Chat calls the plugin. A reply without a message, or one longer than
// req.MaxOutputChars, is an error.
func (c *Client) Chat(ctx context.Context, req *ChatRequest) (*ChatResponse, error) {
	if req == nil {
		return nil, errors.New("broker: nil ChatRequest")
	}
	if req.MaxOutputChars < 0 {
		return nil, fmt.Errorf("broker: %w: negative MaxOutputChars %d", ErrInvalidRequest, req.MaxOutputChars)
	}
	if req.MaxInputChars < 0 {
		return nil, fmt.Errorf("broker: %w: negative MaxInputChars %d", ErrInvalidRequest, req.MaxInputChars)
	}
	r := &pb.ChatRequest{
		Provider: req.Provider, Model: req.Model, MaxOutputChars: req.MaxOutputChars,
		Api: req.API, BaseUrl: req.BaseURL, MaxInputChars: req.MaxInputChars,
		AllowedModels: req.AllowedModels,
	}
	for _, m := range req.Messages {
		r.Messages = append(r.Messages, &pb.ChatMessage{Role: m.Role, Content: m.Content})
	}
	resp, err := c.c.Chat(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("broker plugin: chat: %w", fromStatus(err))
	}
	m := resp.GetMessage()
	if m == nil {
		return nil, errors.New("broker plugin: reply has no message")
	}
	if req.MaxOutputChars > 0 {
		if n := utf8.RuneCountInString(m.GetContent()); int64(n) > req.MaxOutputChars {
			return nil, fmt.Errorf("broker plugin: %w (%d > %d)", ErrOutputTooLong, n, req.MaxOutputChars)
		}
	}
	u := resp.GetUsage()
	return &ChatResponse{
		Message: Message{Role: m.GetRole(), Content: m.GetContent()},
		Usage: Usage{
			InputChars: u.GetInputChars(), OutputChars: u.GetOutputChars(),
			InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens(),
		},
	}, nil
}
