package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentnode/agentnode/kernel/reason"
)

func TestCallError(t *testing.T) {
	if CallError("trust-x", nil) != nil {
		t.Fatal("CallError(nil) != nil")
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{status.Error(codes.Unavailable, "connection reset"), "plugin trust-x is unavailable (exited or unreachable): connection reset"},
		{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), "plugin trust-x did not answer in time"},
		{status.Error(codes.Canceled, "context canceled"), "call to plugin trust-x was canceled"},
		{status.Error(codes.Unknown, "bad attestation"), "plugin trust-x failed: bad attestation"},
		{status.Error(codes.Unimplemented, "unknown method"), "plugin trust-x does not implement this call"},
		{fmt.Errorf("evaluate: %w", context.DeadlineExceeded), "plugin trust-x did not answer in time"},
		{context.Canceled, "call to plugin trust-x was canceled"},
		{errors.New("trust plugin returned invalid level \"x\""), "plugin trust-x failed: trust plugin returned invalid level"},
	} {
		got := CallError("trust-x", tc.err)
		if !errors.Is(got, reason.ErrPluginUnavailable) || reason.CodeOf(got) != reason.PluginUnavailable {
			t.Errorf("CallError(%v) = %v, code %q; want plugin_unavailable", tc.err, got, reason.CodeOf(got))
		}
		if !strings.Contains(got.Error(), tc.want) {
			t.Errorf("CallError(%v) = %q, want it to contain %q", tc.err, got, tc.want)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("CallError(%v) lost the cause", tc.err)
		}
	}
	// An error that already has a code keeps it.
	coded := reason.New(reason.PluginUnpinned, "plugin trust-x changed")
	if got := CallError("trust-x", coded); got != coded {
		t.Errorf("CallError(coded) = %v, want it unchanged", got)
	}
}
