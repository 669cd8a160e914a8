package main

import (
	"context"
	"reflect"
	"testing"

	"github.com/agentnode/agentnode/sdk/guard"
	"github.com/agentnode/agentnode/sdk/guard/guardtest"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// TestGoldenCases runs the golden cases through the real go-plugin gRPC path,
// in memory.
func TestGoldenCases(t *testing.T) {
	c := guardtest.Connect(t, plugin.Info{Name: "domainblock", Kind: plugin.KindGuard, Version: "1.0.0"},
		Inspector{Blocked: DefaultBlocked})
	guardtest.RunCases(t, c, "testdata/cases.yaml")
}

func TestBlocklistFile(t *testing.T) {
	got := ParseBlocklist("# my list\nEvil.Example.\n\n  corp.test  # internal\n#all.test\n")
	if want := []string{"evil.example", "corp.test"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseBlocklist = %q, want %q", got, want)
	}
	resp, err := Inspector{Blocked: got}.Inspect(context.Background(),
		&guard.InspectRequest{InputJSON: []byte(`{"u":"https://x.corp.test/","v":"https://pastebin.com/"}`)})
	if err != nil || resp.Verdict != guard.VerdictDeny || len(resp.Reasons) != 1 {
		t.Fatalf("%+v %v", resp, err)
	}
}
