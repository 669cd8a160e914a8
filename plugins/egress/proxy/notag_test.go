//go:build !egresstest

package main

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"testing"

	"github.com/agentnode/agentnode/sdk/egress"
)

// A build without the egresstest tag refuses a start that asks for test
// destinations, and creates nothing: agentnode (or anything speaking to
// the plugin) cannot make it reach a non-public address.
func TestReleaseBuildRefusesTestDestinations(t *testing.T) {
	dir := t.TempDir()
	for _, req := range []egress.StartRequest{
		{Allowed: []string{"example.com"}, SocketDir: dir, TestHosts: "example.com=127.0.0.1"},
		{Allowed: []string{"example.com"}, SocketDir: dir, TestPermit: "127.0.0.0/8"},
	} {
		inst, err := service{}.Start(context.Background(), &req, func(Event) error { return nil })
		if !errors.Is(err, errNoTestDestinations) {
			if inst != nil {
				inst.Close()
			}
			t.Fatalf("%+v: %v", req, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the refused starts created %v", ents)
	}
	if testPermitted(netip.MustParseAddr("127.0.0.1")) {
		t.Fatal("loopback permitted in a release build")
	}
	// Control: the same start without test destinations runs.
	inst, err := service{}.Start(context.Background(), &egress.StartRequest{Allowed: []string{"example.com"}, SocketDir: dir}, func(Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.Close(); err != nil {
		t.Fatal(err)
	}
}
