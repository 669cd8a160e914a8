// Package plugin holds what every agentnode plugin process shares with the
// host: the go-plugin handshake, the plugin API versions this SDK speaks, the
// Info a plugin reports about itself, and Serve, which runs a plugin of any
// kind over gRPC with a parent-death watchdog.
//
// A plugin binary must not write to stdout before Serve is called: go-plugin
// uses the first stdout line for its handshake.
package plugin

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
)

// Plugin kinds. The kind is also the name of the plugin in go-plugin's
// PluginSet and the middle part of a bundled binary name
// (agentnode-<kind>-<name>).
const (
	KindTrust   = "trust"
	KindGuard   = "guard"
	KindSandbox = "sandbox"
	KindBroker  = "broker"
	KindEgress  = "egress"
)

// Kinds lists every plugin kind in a stable order.
var Kinds = []string{KindTrust, KindGuard, KindSandbox, KindBroker, KindEgress}

// APIVersion is the newest plugin API version this SDK implements.
// SupportedAPIVersions are all of them, newest first. Version negotiation
// happens in the go-plugin handshake (VersionedPlugins); Info repeats the
// list so the host can report it.
const APIVersion = 1

// SupportedAPIVersions lists the plugin API versions this SDK speaks.
var SupportedAPIVersions = []int{1}

// Handshake is the go-plugin handshake shared by host and plugins. It is a
// UX guard against running a plugin binary by hand, not a security control;
// binaries are authenticated by their SHA-256 pin.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "AGENTNODE_PLUGIN_COOKIE",
	MagicCookieValue: "5b1d8f0c2a7e4e36a0c9e5d3agentnode",
}

// Info describes a plugin.
type Info struct {
	Name        string
	Kind        string
	Version     string
	APIVersions []uint32
}

// VersionedSet builds the go-plugin VersionedPlugins map for one plugin of the
// given kind, registered under every supported API version.
func VersionedSet(kind string, p goplugin.Plugin) map[int]goplugin.PluginSet {
	m := make(map[int]goplugin.PluginSet, len(SupportedAPIVersions))
	for _, v := range SupportedAPIVersions {
		m[v] = goplugin.PluginSet{kind: p}
	}
	return m
}

// ServeConfig configures Serve.
type ServeConfig struct {
	// Kind is one of the Kind constants.
	Kind string
	// Plugin is the gRPC adapter of the kind (trust.GRPCPlugin, ...).
	Plugin goplugin.Plugin
	// Logger receives the plugin's logs (stderr, forwarded by the host).
	// Default: a JSON hclog logger on stderr at level Info.
	Logger hclog.Logger
}

// Serve runs the plugin until the host closes it. It never returns on
// success. Serve refuses to run when started by hand (no handshake cookie).
func Serve(cfg *ServeConfig) {
	if cfg == nil || cfg.Plugin == nil {
		fmt.Fprintln(os.Stderr, "agentnode plugin: Serve called without a plugin")
		os.Exit(2)
	}
	if os.Getenv(Handshake.MagicCookieKey) != Handshake.MagicCookieValue {
		fmt.Fprintln(os.Stderr, "This binary is an agentnode plugin. It is started by agentnode, not by hand.")
		os.Exit(2)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = NewLogger(cfg.Kind)
	}
	StartWatchdog(time.Second / 4)
	settleGC(os.Getenv("GOGC"), SettleAfter)
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: VersionedSet(cfg.Kind, cfg.Plugin),
		GRPCServer:       goplugin.DefaultGRPCServer,
		Logger:           logger,
		TLSProvider:      serverTLS,
	})
}

// SettleAfter is how long a plugin runs before settleGC puts the garbage
// collector's target back to Go's default.
const SettleAfter = time.Second

// settleGC returns the collector's target to Go's default (GOGC=100) once
// the plugin has run for after, when the host started it with a higher one.
// The host starts the plugins every command needs (trust, guard) with a
// high target so that a short-lived command's start-up runs no collection
// (kernel/pluginhost); a plugin still running after a second serves a
// long-lived host (`agentnode mcp serve`), where that target would let its
// heap settle at five times what it holds (trust and guard plugins grew
// from 14 to 30 MiB resident over the first thousands of calls) instead of
// twice.
func settleGC(gogc string, after time.Duration) *time.Timer {
	if v, err := strconv.Atoi(gogc); err != nil || v <= 100 {
		return nil
	}
	return time.AfterFunc(after, func() { debug.SetGCPercent(100) })
}

// NewLogger returns the hclog logger plugins should use: JSON on stderr, which
// go-plugin forwards into the host's log with the plugin's name.
func NewLogger(name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Output:     os.Stderr,
		Level:      hclog.Info,
		JSONFormat: true,
	})
}

// StartWatchdog exits the process when its parent dies (the process is
// re-parented, so getppid changes). The host also sets Pdeathsig and kills the
// plugin's process group; the watchdog covers plugins started some other way.
func StartWatchdog(every time.Duration) {
	parent := os.Getppid()
	go func() {
		for {
			time.Sleep(every)
			if os.Getppid() != parent {
				os.Exit(3)
			}
		}
	}()
}
