package plugin_test

import (
	"reflect"
	"testing"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/agentnode/agentnode/sdk/plugin"
	pb "github.com/agentnode/agentnode/sdk/proto/agentnodev1"
	"github.com/agentnode/agentnode/sdk/trust"
)

func TestVersionedSet(t *testing.T) {
	p := &trust.GRPCPlugin{}
	got := plugin.VersionedSet(plugin.KindTrust, p)
	if len(got) != len(plugin.SupportedAPIVersions) {
		t.Fatalf("%d versions, want %d", len(got), len(plugin.SupportedAPIVersions))
	}
	for _, v := range plugin.SupportedAPIVersions {
		if want := (goplugin.PluginSet{plugin.KindTrust: p}); !reflect.DeepEqual(got[v], want) {
			t.Errorf("version %d: %v, want %v", v, got[v], want)
		}
	}
	if plugin.SupportedAPIVersions[0] != plugin.APIVersion {
		t.Errorf("SupportedAPIVersions[0] = %d, want the newest, %d", plugin.SupportedAPIVersions[0], plugin.APIVersion)
	}
}

func TestInfoToProtoFillsDefaults(t *testing.T) {
	got := plugin.InfoToProto(plugin.KindGuard, plugin.Info{Name: "n", Version: "1"})
	if got.GetKind() != plugin.KindGuard || !reflect.DeepEqual(got.GetApiVersions(), []uint32{1}) {
		t.Errorf("InfoToProto = %v", got)
	}
	// Explicit values win.
	got = plugin.InfoToProto(plugin.KindGuard, plugin.Info{Name: "n", Kind: "other", APIVersions: []uint32{7}})
	if got.GetKind() != "other" || !reflect.DeepEqual(got.GetApiVersions(), []uint32{7}) {
		t.Errorf("InfoToProto = %v", got)
	}
}

func TestInfoFromProto(t *testing.T) {
	if got := plugin.InfoFromProto(nil); !reflect.DeepEqual(got, plugin.Info{}) {
		t.Errorf("InfoFromProto(nil) = %+v", got)
	}
	in := &pb.Info{Name: "n", Kind: "k", Version: "v", ApiVersions: []uint32{1, 2}}
	want := plugin.Info{Name: "n", Kind: "k", Version: "v", APIVersions: []uint32{1, 2}}
	if got := plugin.InfoFromProto(in); !reflect.DeepEqual(got, want) {
		t.Errorf("InfoFromProto = %+v, want %+v", got, want)
	}
}

func TestKindsAndHandshake(t *testing.T) {
	if want := []string{"trust", "guard", "sandbox", "broker", "egress"}; !reflect.DeepEqual(plugin.Kinds, want) {
		t.Errorf("Kinds = %q, want %q", plugin.Kinds, want)
	}
	h := plugin.Handshake
	if h.ProtocolVersion == 0 || h.MagicCookieKey == "" || h.MagicCookieValue == "" {
		t.Errorf("incomplete handshake %+v", h)
	}
}
