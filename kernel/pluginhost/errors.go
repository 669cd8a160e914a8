package pluginhost

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentnode/agentnode/kernel/reason"
)

// CallError converts an error returned by a call to a plugin into a
// reason.ErrPluginUnavailable error naming the plugin. name is how the
// plugin is shown to users, normally Key(kind, name) ("trust-default").
//
// Transport failures (the plugin exited or crashed, the connection broke),
// missed deadlines and cancellations are described as such; an error the
// plugin itself returned keeps its message. All of them are
// plugin_unavailable: the kernel fails closed whatever the cause, and the
// original error stays in the chain for errors.Is (context.DeadlineExceeded,
// ...). An error that already carries a reason code is returned unchanged,
// and nil stays nil.
func CallError(name string, err error) error {
	if err == nil {
		return nil
	}
	if reason.CodeOf(err) != "" {
		return err
	}
	wrap := func(format string, args ...any) error {
		return &reason.Error{Code: reason.PluginUnavailable, Msg: fmt.Sprintf(format, args...), Err: err}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return wrap("plugin %s did not answer in time: %v", name, err)
	case errors.Is(err, context.Canceled):
		return wrap("call to plugin %s was canceled: %v", name, err)
	}
	st, ok := status.FromError(err)
	if !ok {
		return wrap("plugin %s failed: %v", name, err)
	}
	switch st.Code() {
	case codes.DeadlineExceeded:
		return wrap("plugin %s did not answer in time: %s", name, st.Message())
	case codes.Canceled:
		return wrap("call to plugin %s was canceled: %s", name, st.Message())
	case codes.Unavailable:
		return wrap("plugin %s is unavailable (exited or unreachable): %s", name, st.Message())
	case codes.Unimplemented:
		return wrap("plugin %s does not implement this call: %s", name, st.Message())
	}
	return wrap("plugin %s failed: %s", name, st.Message())
}
