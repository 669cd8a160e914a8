package plugin_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentnode/agentnode/sdk/broker"
	"github.com/agentnode/agentnode/sdk/egress"
	"github.com/agentnode/agentnode/sdk/guard"
	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/plugin/plugintest"
	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/trust"
)

// TestInfoServiceEveryKind: every kind's service answers Info through the
// shared InfoService (over real in-memory gRPC), with its own kind filled
// in, and every kind's client reads it through the shared InfoClient; once
// the connection is gone, the client's error names the kind and keeps the
// gRPC status.
func TestInfoServiceEveryKind(t *testing.T) {
	in := plugin.Info{Name: "n", Version: "1.2.3"}
	type infoer interface {
		Info(context.Context) (plugin.Info, error)
	}
	for kind, connect := range map[string]func(t *testing.T) (infoer, func() error){
		plugin.KindTrust: func(t *testing.T) (infoer, func() error) {
			c, g := plugintest.Connect[*trust.Client](t, plugin.KindTrust, &trust.GRPCPlugin{Info: in})
			return c, g.Close
		},
		plugin.KindGuard: func(t *testing.T) (infoer, func() error) {
			c, g := plugintest.Connect[*guard.Client](t, plugin.KindGuard, &guard.GRPCPlugin{Info: in})
			return c, g.Close
		},
		plugin.KindSandbox: func(t *testing.T) (infoer, func() error) {
			c, g := plugintest.Connect[*sandbox.Client](t, plugin.KindSandbox, &sandbox.GRPCPlugin{Info: in})
			return c, g.Close
		},
		plugin.KindBroker: func(t *testing.T) (infoer, func() error) {
			c, g := plugintest.Connect[*broker.Client](t, plugin.KindBroker, &broker.GRPCPlugin{Info: in})
			return c, g.Close
		},
		plugin.KindEgress: func(t *testing.T) (infoer, func() error) {
			c, g := plugintest.Connect[*egress.Client](t, plugin.KindEgress, &egress.GRPCPlugin{Info: in})
			return c, g.Close
		},
	} {
		t.Run(kind, func(t *testing.T) {
			c, closeConn := connect(t)
			got, err := c.Info(t.Context())
			want := plugin.Info{Name: "n", Kind: kind, Version: "1.2.3", APIVersions: []uint32{uint32(plugin.APIVersion)}}
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("Info = %+v, %v; want %+v", got, err, want)
			}
			if err := closeConn(); err != nil {
				t.Fatal(err)
			}
			_, err = c.Info(t.Context())
			if err == nil || !strings.HasPrefix(err.Error(), kind+" plugin: info: ") {
				t.Fatalf("Info over a closed connection = %v, want a %q error", err, kind+" plugin: info: ")
			}
			if s, ok := status.FromError(err); !ok || s.Code() == codes.OK {
				t.Errorf("the gRPC status is lost: %v", err)
			}
		})
	}
}
