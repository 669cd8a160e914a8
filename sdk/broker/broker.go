// Package broker is the plugin contract for LLM brokers: host-side model
// calls made on behalf of sandboxed agents. The broker holds the provider
// credentials (from the OS keychain); they never cross into the sandbox or
// into the kernel's requests. The kernel enforces call budgets; the Client
// additionally refuses a reply longer than MaxOutputChars.
package broker

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

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
	Provider string
	Model    string
	Messages []Message
	// MaxOutputChars bounds the reply's content, in characters (Unicode code
	// points). Zero means no bound from the caller.
	MaxOutputChars int64
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

// GRPCPlugin adapts a Broker to go-plugin. Impl and Info are used on the
// plugin side; the host uses a zero GRPCPlugin.
type GRPCPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl Broker
	Info plugin.Info
}

// GRPCServer registers the Broker service.
func (p *GRPCPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterBrokerServer(s, &server{impl: p.Impl, info: plugin.InfoToProto(plugin.KindBroker, p.Info)})
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
	pb.UnimplementedBrokerServer
	impl Broker
	info *pb.Info
}

func (s *server) Info(context.Context, *pb.InfoRequest) (*pb.Info, error) { return s.info, nil }

func (s *server) Chat(ctx context.Context, r *pb.ChatRequest) (*pb.ChatResponse, error) {
	req := &ChatRequest{Provider: r.GetProvider(), Model: r.GetModel(), MaxOutputChars: r.GetMaxOutputChars()}
	for _, m := range r.GetMessages() {
		req.Messages = append(req.Messages, Message{Role: m.GetRole(), Content: m.GetContent()})
	}
	resp, err := s.impl.Chat(ctx, req)
	if err != nil {
		return nil, err
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
type Client struct{ c pb.BrokerClient }

var _ Broker = (*Client)(nil)

// NewClient wraps a gRPC connection to a Broker service.
func NewClient(cc grpc.ClientConnInterface) *Client { return &Client{c: pb.NewBrokerClient(cc)} }

// Info asks the plugin to describe itself.
func (c *Client) Info(ctx context.Context) (plugin.Info, error) {
	i, err := c.c.Info(ctx, &pb.InfoRequest{})
	if err != nil {
		return plugin.Info{}, fmt.Errorf("broker plugin: info: %w", err)
	}
	return plugin.InfoFromProto(i), nil
}

// Chat calls the plugin. A reply without a message, or one longer than
// req.MaxOutputChars, is an error.
func (c *Client) Chat(ctx context.Context, req *ChatRequest) (*ChatResponse, error) {
	if req == nil {
		return nil, errors.New("broker: nil ChatRequest")
	}
	if req.MaxOutputChars < 0 {
		return nil, fmt.Errorf("broker: negative MaxOutputChars %d", req.MaxOutputChars)
	}
	r := &pb.ChatRequest{Provider: req.Provider, Model: req.Model, MaxOutputChars: req.MaxOutputChars}
	for _, m := range req.Messages {
		r.Messages = append(r.Messages, &pb.ChatMessage{Role: m.Role, Content: m.Content})
	}
	resp, err := c.c.Chat(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("broker plugin: chat: %w", err)
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
