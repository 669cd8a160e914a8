package brokertest_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentnode/agentnode/sdk/broker"
	"github.com/agentnode/agentnode/sdk/broker/brokertest"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// echoBroker answers with the last message upper-cased, truncated to
// MaxOutputChars unless overlong is set, and counts characters.
type echoBroker struct {
	mu       sync.Mutex
	last     *broker.ChatRequest
	overlong bool
}

func (e *echoBroker) Chat(ctx context.Context, req *broker.ChatRequest) (*broker.ChatResponse, error) {
	e.mu.Lock()
	e.last = req
	e.mu.Unlock()
	if req.Model == "slow" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if len(req.Messages) == 0 {
		return nil, errors.New("no messages")
	}
	var in int64
	for _, m := range req.Messages {
		in += int64(utf8.RuneCountInString(m.Content))
	}
	out := []rune(strings.ToUpper(req.Messages[len(req.Messages)-1].Content))
	if req.MaxOutputChars > 0 && int64(len(out)) > req.MaxOutputChars && !e.overlong {
		out = out[:req.MaxOutputChars]
	}
	return &broker.ChatResponse{
		Message: broker.Message{Role: broker.RoleAssistant, Content: string(out)},
		Usage:   broker.Usage{InputChars: in, OutputChars: int64(len(out)), InputTokens: 3, OutputTokens: 4},
	}, nil
}

var info = plugin.Info{Name: "echo", Version: "1.0.0"}

func TestChat(t *testing.T) {
	impl := &echoBroker{}
	c := brokertest.Connect(t, info, impl)
	req := &broker.ChatRequest{
		Provider: "openai", Model: "m1", MaxOutputChars: 100,
		Messages:      []broker.Message{{Role: broker.RoleSystem, Content: "be brief"}, {Role: broker.RoleUser, Content: "héllo"}},
		API:           "openai",
		BaseURL:       "http://127.0.0.1:8080/v1",
		MaxInputChars: 2000,
		AllowedModels: []string{"m1", "m2"},
	}
	resp, err := c.Chat(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := &broker.ChatResponse{
		Message: broker.Message{Role: broker.RoleAssistant, Content: "HÉLLO"},
		Usage:   broker.Usage{InputChars: 13, OutputChars: 5, InputTokens: 3, OutputTokens: 4},
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("Chat = %+v, want %+v", resp, want)
	}
	impl.mu.Lock()
	defer impl.mu.Unlock()
	if !reflect.DeepEqual(impl.last, req) {
		t.Errorf("plugin got %+v, want %+v", impl.last, req)
	}
}

func TestInfo(t *testing.T) {
	got, err := brokertest.Connect(t, info, &echoBroker{}).Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := (plugin.Info{Name: "echo", Kind: plugin.KindBroker, Version: "1.0.0", APIVersions: []uint32{1}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("Info = %+v, want %+v", got, want)
	}
}

func TestMaxOutputCharsEnforced(t *testing.T) {
	c := brokertest.Connect(t, info, &echoBroker{overlong: true})
	req := &broker.ChatRequest{MaxOutputChars: 3, Messages: []broker.Message{{Role: broker.RoleUser, Content: "ééé"}}}
	if _, err := c.Chat(t.Context(), req); err != nil {
		t.Fatalf("3 characters (6 bytes) within a limit of 3: %v", err)
	}
	req.Messages[0].Content = "éééé"
	if _, err := c.Chat(t.Context(), req); !errors.Is(err, broker.ErrOutputTooLong) {
		t.Fatalf("error %v, want ErrOutputTooLong", err)
	}
	req.MaxOutputChars = -1
	if _, err := c.Chat(t.Context(), req); !errors.Is(err, broker.ErrInvalidRequest) {
		t.Fatalf("negative MaxOutputChars: %v", err)
	}
	req.MaxOutputChars, req.MaxInputChars = 0, -1
	if _, err := c.Chat(t.Context(), req); !errors.Is(err, broker.ErrInvalidRequest) {
		t.Fatalf("negative MaxInputChars: %v", err)
	}
}

func TestPluginError(t *testing.T) {
	c := brokertest.Connect(t, info, &echoBroker{})
	_, err := c.Chat(t.Context(), &broker.ChatRequest{})
	if err == nil || !strings.Contains(err.Error(), "no messages") {
		t.Fatalf("error %v, want the plugin's error", err)
	}
}

func TestDeadlinePropagates(t *testing.T) {
	c := brokertest.Connect(t, info, &echoBroker{})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	// "slow" waits for its context: returning at all, with
	// DeadlineExceeded, is the proof the deadline reached the plugin.
	_, err := c.Chat(ctx, &broker.ChatRequest{Model: "slow"})
	if status.Code(errors.Unwrap(err)) != codes.DeadlineExceeded {
		t.Fatalf("error %v, want DeadlineExceeded", err)
	}
}

type nilBroker struct{}

func (nilBroker) Chat(context.Context, *broker.ChatRequest) (*broker.ChatResponse, error) {
	return nil, nil
}

func TestNilResponseIsError(t *testing.T) {
	c := brokertest.Connect(t, info, nilBroker{})
	if resp, err := c.Chat(t.Context(), &broker.ChatRequest{}); err == nil {
		t.Fatalf("got %+v, want an error", resp)
	}
}

// errBroker returns err from every call.
type errBroker struct{ err error }

func (e errBroker) Chat(context.Context, *broker.ChatRequest) (*broker.ChatResponse, error) {
	return nil, e.err
}

// TestSentinelErrorsCrossTheWire: each sentinel a plugin wraps arrives on
// the host side as the same sentinel (and as no other), with the message.
func TestSentinelErrorsCrossTheWire(t *testing.T) {
	sentinels := []error{
		broker.ErrCredentialsMissing, broker.ErrCredentialsRejected, broker.ErrModelNotAllowed,
		broker.ErrInputTooLong, broker.ErrOutputTooLong, broker.ErrInvalidRequest, broker.ErrProviderFailed,
	}
	for _, want := range sentinels {
		c := brokertest.Connect(t, info, errBroker{fmt.Errorf("provider p: %w", want)})
		_, err := c.Chat(t.Context(), &broker.ChatRequest{})
		if !errors.Is(err, want) {
			t.Errorf("plugin returned %v; host got %v", want, err)
			continue
		}
		if !strings.Contains(err.Error(), "provider p: "+want.Error()) {
			t.Errorf("host error %q lost the plugin's message", err)
		}
		for _, other := range sentinels {
			if other != want && errors.Is(err, other) {
				t.Errorf("plugin returned %v; host error also matches %v", want, other)
			}
		}
	}
	// A plain error matches none of them.
	_, err := brokertest.Connect(t, info, errBroker{errors.New("plain")}).Chat(t.Context(), &broker.ChatRequest{})
	for _, s := range sentinels {
		if errors.Is(err, s) {
			t.Errorf("plain error %v matches %v", err, s)
		}
	}
}
