// Package pluginhost finds, verifies, starts and stops agentnode's plugin
// processes (trust, guard, sandbox, broker and egress kinds), fail closed.
//
// Catalog: a plugin is a file named agentnode-<kind>-<name> in the directory
// of the agentnode executable (bundled plugins) or in home.PluginsDir (user
// installed). When both hold the same kind/name, the one beside agentnode
// runs and the other is reported as shadowed.
//
// Pins: a plugin runs only if pins.json records its resolved path and its
// SHA-256 and both still match; otherwise the error wraps
// reason.ErrPluginUnpinned. The kernel only reads pins.json (LoadPins);
// listing the plugins and writing pins (`agentnode plugins list|pin`,
// setup) is the front end's, cmd/agentnode/plugincat, which shares the
// search order (Scan), the pin reader and the file-mode check from here. The hash is computed on the opened binary right
// before exec, and exactly that open file is executed (runner.go), so the
// file cannot be swapped between the check and exec.
//
// Launch: plugins speak gRPC over go-plugin with mutual TLS the host issues
// (mtls.go), get no host
// environment (a broker plugin only the D-Bus session bus address, see
// BrokerEnv) and /dev/null as stdin, run in their own process group with
// Pdeathsig SIGKILL, and are forked from a dedicated OS thread that lives as
// long as the process (see launch.go). Host.Close kills every plugin it started and its whole process
// group. Any failure to start, hand-shake or describe itself makes a plugin
// unavailable (reason.ErrPluginUnavailable); errors of later calls are
// converted by CallError.
//
// specs/plugins.md documents the user-visible behaviour.
//
// It is in the trusted core because the trust and Guard plugins a decision asks
// are launched, pinned and checked here.
package pluginhost

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/agentnode/agentnode/kernel/hashcache"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// Defaults of Options.
const (
	DefaultStartTimeout = 10 * time.Second
	DefaultCallTimeout  = 10 * time.Second
)

// LogEnv names the environment variable that sets the host's log level
// (trace, debug, info, warn, error, off). The default is warn.
const LogEnv = "AGENTNODE_LOG"

// Options configure a Host. Zero values take the defaults.
type Options struct {
	// HomeDir is the agentnode home; default home.Dir().
	HomeDir string
	// BinDir holds the bundled plugins; default DefaultBinDir().
	BinDir string
	// Logger receives the host's logs and each plugin's stderr; default
	// DefaultLogger(LogOutput).
	Logger hclog.Logger
	// LogOutput is where the default logger writes. What a plugin writes
	// to its stderr is text the plugin chose, so a front end passes a
	// writer that makes it safe for a terminal (cmd/agentnode passes
	// termsafe.NewWriter(os.Stderr)). nil means io.Discard: the host never
	// writes a plugin's raw text to a terminal on its own.
	LogOutput io.Writer
	// StartTimeout bounds the start and handshake of one plugin; default
	// DefaultStartTimeout.
	StartTimeout time.Duration
	// CallTimeout is the per-call deadline callers should use
	// (Host.CallTimeout), and bounds the Info call made at start; default
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// Trace, when set, is called as each plugin launch begins; the launch calls end with its result and gives
	// the plugin's gRPC connection dial, so a stats handler there sees each call (cmd/agentnode's --trace).
	Trace func(key string) (end func(error), dial []grpc.DialOption)
}

// DefaultLogger returns an hclog logger writing to w (io.Discard when nil),
// quiet by default (warn); AGENTNODE_LOG raises or lowers the level. What
// plugins write to their stderr is logged through it unchanged: w must
// escape it when it is a terminal (see Options.LogOutput).
func DefaultLogger(w io.Writer) hclog.Logger {
	if w == nil {
		w = io.Discard
	}
	level := hclog.Warn
	if v := os.Getenv(LogEnv); v != "" {
		if l := hclog.LevelFromString(v); l != hclog.NoLevel {
			level = l
		}
	}
	return hclog.New(&hclog.LoggerOptions{Name: "agentnode", Output: w, Level: level})
}

// Host starts plugins on demand, caches one process per kind/name, and stops
// them all on Close. It is safe for concurrent use.
type Host struct {
	homeDir, binDir string
	hashes          *hashcache.Cache // verified plugin binary digests
	initErr         error
	logger          hclog.Logger
	startTimeout    time.Duration
	callTimeout     time.Duration
	trace           func(string) (func(error), []grpc.DialOption)

	mu        sync.Mutex
	closed    bool
	slots     map[string]*slot
	dedicated map[*Dedicated]struct{} // started by startDedicated, not stopped yet
	launches  sync.WaitGroup
}

// slot is the cache entry of one kind/name. ready is closed once proc or
// err is set.
type slot struct {
	ready chan struct{}
	proc  *proc
	err   error
}

// proc is one running plugin process.
type proc struct {
	key    string
	kind   string
	client *goplugin.Client
	ctl    *runnerCtl
	raw    any
	pid    int
	once   sync.Once
}

// New returns a Host. Problems locating the home or bin directory surface
// on the first dispense.
func New(opts Options) *Host {
	h := &Host{
		homeDir:      opts.HomeDir,
		binDir:       opts.BinDir,
		logger:       opts.Logger,
		startTimeout: opts.StartTimeout,
		callTimeout:  opts.CallTimeout,
		trace:        opts.Trace,
		slots:        map[string]*slot{},
		dedicated:    map[*Dedicated]struct{}{},
	}
	if h.logger == nil {
		h.logger = DefaultLogger(opts.LogOutput)
	}
	if h.startTimeout <= 0 {
		h.startTimeout = DefaultStartTimeout
	}
	if h.callTimeout <= 0 {
		h.callTimeout = DefaultCallTimeout
	}
	if h.homeDir == "" {
		h.homeDir, h.initErr = home.Dir()
	}
	if h.homeDir != "" {
		h.hashes = hashcache.Open(hashCachePath(h.homeDir))
	}
	if h.binDir == "" && h.initErr == nil {
		h.binDir, h.initErr = DefaultBinDir()
	}
	return h
}

// CallTimeout is the deadline callers should put on each plugin call.
func (h *Host) CallTimeout() time.Duration { return h.callTimeout }

// PID returns the process id of the running plugin of kind/name, or 0 when
// none is running.
func (h *Host) PID(kind, name string) int {
	h.mu.Lock()
	s := h.slots[Key(kind, name)]
	h.mu.Unlock()
	if s == nil {
		return 0
	}
	select {
	case <-s.ready:
	default:
		return 0
	}
	if s.proc == nil || s.proc.client.Exited() {
		return 0
	}
	return s.proc.pid
}

// Prestart begins starting kind/name in the background, if it is not
// running or starting already, so that its start overlaps other work. The
// result (or error) is picked up by the next dispense of the same plugin.
func (h *Host) Prestart(kind, name string) {
	key := Key(kind, name)
	newAdapter, ok := adapters[kind]
	if !ok || !ValidName(name) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.slots[key] != nil {
		return
	}
	s := &slot{ready: make(chan struct{})}
	h.slots[key] = s
	h.launches.Add(1)
	go h.launch(s, kind, name, newAdapter)
}

// dispenseAs dispenses kind/name and asserts the client type.
func dispenseAs[T any](ctx context.Context, h *Host, kind, name string) (T, error) {
	var zero T
	raw, err := h.dispense(ctx, kind, name)
	if err != nil {
		return zero, err
	}
	c, ok := raw.(T)
	if !ok {
		return zero, reason.New(reason.PluginUnavailable, "plugin %s: adapter dispensed %T, want %T", Key(kind, name), raw, zero)
	}
	return c, nil
}

// dispense returns the dispensed client of kind/name, starting the plugin if
// it is not running. A cached plugin that has exited is stopped and started
// again. ctx bounds only the wait: a start already under way continues and is
// cached for later callers.
func (h *Host) dispense(ctx context.Context, kind, name string) (any, error) {
	key := Key(kind, name)
	if !validKind(kind) || !ValidName(name) {
		return nil, reason.New(reason.PluginUnavailable, "plugin %s: invalid kind or name", key)
	}
	newAdapter, ok := adapters[kind]
	if !ok {
		return nil, reason.New(reason.PluginUnavailable, "plugin %s: this agentnode cannot host %s plugins", key, kind)
	}
	for attempt := 0; ; attempt++ {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, reason.New(reason.PluginUnavailable, "plugin %s: plugin host is closed", key)
		}
		s := h.slots[key]
		if s == nil {
			s = &slot{ready: make(chan struct{})}
			h.slots[key] = s
			h.launches.Add(1)
			go h.launch(s, kind, name, newAdapter)
		}
		h.mu.Unlock()

		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, reason.New(reason.PluginUnavailable, "plugin %s: gave up waiting for it to start: %w", key, ctx.Err())
		}
		if s.err != nil {
			return nil, s.err
		}
		if !s.proc.client.Exited() {
			return s.proc.raw, nil
		}
		h.mu.Lock()
		if h.slots[key] == s {
			delete(h.slots, key)
		}
		h.mu.Unlock()
		h.stop(s.proc)
		if attempt > 0 {
			return nil, reason.New(reason.PluginUnavailable, "plugin %s: exited right after starting", key)
		}
		h.logger.Warn("plugin exited; starting it again", "plugin", key)
	}
}

// launch starts kind/name and publishes the result in s.
func (h *Host) launch(s *slot, kind, name string, newAdapter func() goplugin.Plugin) {
	defer h.launches.Done()
	key := Key(kind, name)
	p, err := h.start(kind, name, newAdapter())

	h.mu.Lock()
	if err == nil && h.closed {
		err = reason.New(reason.PluginUnavailable, "plugin %s: plugin host closed while it started", key)
	}
	if err != nil {
		if h.slots[key] == s {
			delete(h.slots, key)
		}
		s.err = err
	} else {
		s.proc = p
	}
	h.mu.Unlock()
	if err != nil && p != nil {
		h.stop(p)
	}
	close(s.ready)
}

// locate finds the binary that would run for kind/name and checks it against
// its pin. It returns the resolved path and the pinned checksum.
func (h *Host) locate(kind, name string) (string, []byte, error) {
	key := Key(kind, name)
	if h.initErr != nil {
		return "", nil, reason.New(reason.PluginUnavailable, "plugin %s: %w", key, h.initErr)
	}
	path, found, err := Lookup(h.homeDir, h.binDir, kind, name)
	if err != nil {
		return "", nil, reason.New(reason.PluginUnavailable, "plugin %s: %w", key, err)
	}
	if !found {
		return "", nil, reason.New(reason.PluginUnavailable, "plugin %s is not installed (no %s in %s or %s)",
			key, FileName(kind, name), h.binDir, home.PluginsDir(h.homeDir))
	}
	pins, err := LoadPins(h.homeDir)
	if err != nil {
		return "", nil, err
	}
	rec, ok := pins[key]
	if !ok {
		return "", nil, reason.New(reason.PluginUnpinned, "plugin %s (%s) is not pinned; run `agentnode plugins pin %s`", key, path, path)
	}
	if rec.Path != path {
		return "", nil, reason.New(reason.PluginUnpinned, "plugin %s: found at %s but pinned at %s", key, path, rec.Path)
	}
	if err := CheckFileMode(path); err != nil {
		return "", nil, reason.New(reason.PluginUnpinned, "plugin %s: %w", key, err)
	}
	// The file is hashed once, by pinnedRunner on the opened file right
	// before exec (runner.go); hashing it here as well would only double
	// the cost of every launch (a plugin binary is ~20 MB).
	checksum, err := hex.DecodeString(rec.SHA256)
	if err != nil { // validated by LoadPins
		return "", nil, reason.New(reason.PluginUnpinned, "plugin %s: %w", key, err)
	}
	return path, checksum, nil
}

// clientConfig is the go-plugin configuration of one plugin launch.
// The plugin is started by pinnedRunner (RunnerFunc), which verifies the
// pin on the opened binary and gives the plugin /dev/null as stdin; Cmd and
// SecureConfig stay unset (go-plugin allows only one of Cmd and RunnerFunc).
//
// The connection is mutual TLS with certificates the host issues (mtls.go)
// instead of go-plugin's AutoMTLS: the same guarantee, a fraction of the
// cost.
func (h *Host) clientConfig(kind, name, path string, checksum []byte, adapter goplugin.Plugin, ctl *runnerCtl) (*goplugin.ClientConfig, error) {
	tlsConfig, bundle, err := launchTLS()
	if err != nil {
		return nil, err
	}
	return &goplugin.ClientConfig{
		HandshakeConfig:  plugin.Handshake,
		VersionedPlugins: plugin.VersionedSet(kind, adapter),
		RunnerFunc:       runnerFunc(h.hashes, kind, Key(kind, name), path, checksum, bundle, ctl),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		TLSConfig:        tlsConfig,
		SkipHostEnv:      true,
		Managed:          false,
		StartTimeout:     h.startTimeout,
		Logger:           h.logger.Named("plugin"),
	}, nil
}

// BrokerEnv lists the only host environment variables a plugin gets, and
// only a broker plugin: the D-Bus session bus, through which it reads
// provider credentials from the OS keychain (Secret Service). Every other
// kind gets no host environment at all.
var BrokerEnv = []string{"DBUS_SESSION_BUS_ADDRESS"}

// EvaluatorGOGC is the garbage collector setting (GOGC) trust and guard
// plugins run with. They are started for every command and answer a call or
// two with a heap of a few megabytes; collecting at 400% instead of 100% of
// the live heap spares them the collections during start-up that otherwise
// compete with the host for the CPU (about 2.5 ms of every cold run on two
// cores). It is a fixed value, not the host's: no host environment reaches
// a plugin.
const EvaluatorGOGC = "GOGC=400"

// pluginEnv is the environment of a plugin of kind, before go-plugin adds
// its handshake variables (SkipHostEnv keeps the rest of the host's out);
// see runnerFunc.
func pluginEnv(kind string) []string {
	switch kind {
	case plugin.KindTrust, plugin.KindGuard:
		return []string{EvaluatorGOGC}
	case plugin.KindBroker:
	default:
		return nil
	}
	var env []string
	for _, k := range BrokerEnv {
		// "autolaunch:" would let the bus library spawn a dbus-daemon.
		if v := os.Getenv(k); v != "" && v != "autolaunch:" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// start verifies, launches, dispenses and checks one plugin. On error the
// returned proc, if any, still needs stopping.
func (h *Host) start(kind, name string, adapter goplugin.Plugin) (p *proc, err error) {
	key := Key(kind, name)
	var dial []grpc.DialOption
	if h.trace != nil {
		var end func(error)
		end, dial = h.trace(key)
		defer func() { end(err) }()
	}
	path, checksum, err := h.locate(kind, name)
	if err != nil {
		return nil, err
	}
	ctl := new(runnerCtl)
	cfg, err := h.clientConfig(kind, name, path, checksum, adapter, ctl)
	if err != nil {
		return nil, reason.New(reason.PluginUnavailable, "plugin %s: %w", key, err)
	}
	cfg.GRPCDialOptions = dial
	client := goplugin.NewClient(cfg)
	var startErr error
	onLaunchThread(func() { _, startErr = client.Start() })
	p = &proc{key: key, kind: kind, client: client, ctl: ctl}
	p.pid, _ = strconv.Atoi(client.ID())
	if reason.CodeOf(startErr) != "" { // pinnedRunner: changed since pinned
		return p, startErr
	}
	if startErr != nil {
		return p, reason.New(reason.PluginUnavailable, "plugin %s (%s) did not start: %s", key, path, oneLine(startErr))
	}
	rpc, err := client.Client()
	if err != nil {
		return p, reason.New(reason.PluginUnavailable, "plugin %s: connect: %w", key, err)
	}
	raw, err := rpc.Dispense(kind)
	if err != nil {
		return p, reason.New(reason.PluginUnavailable, "plugin %s: dispense: %w", key, err)
	}
	p.raw = raw
	inf, ok := raw.(infoer)
	if !ok {
		return p, reason.New(reason.PluginUnavailable, "plugin %s: %T has no Info method", key, raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.callTimeout)
	defer cancel()
	info, err := inf.Info(ctx)
	if err != nil {
		return p, CallError(key, fmt.Errorf("info: %w", err))
	}
	if info.Kind != kind {
		return p, reason.New(reason.PluginUnavailable, "plugin %s reports kind %q, want %q", key, info.Kind, kind)
	}
	if !sharesVersion(info.APIVersions) {
		return p, reason.New(reason.PluginUnavailable, "plugin %s speaks plugin API versions %v, agentnode speaks %v",
			key, info.APIVersions, plugin.SupportedAPIVersions)
	}
	h.logger.Debug("plugin started", "plugin", key, "path", path, "pid", p.pid,
		"version", info.Version, "api", client.NegotiatedVersion())
	return p, nil
}

func sharesVersion(vs []uint32) bool {
	for _, v := range vs {
		if slices.Contains(plugin.SupportedAPIVersions, int(v)) {
			return true
		}
	}
	return false
}

// oneLine keeps the first line of go-plugin's multi-line start errors.
func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// stop ends one plugin: go-plugin's shutdown (graceful, then SIGKILL of the
// plugin after 2s), then SIGKILL to its process group for anything it left
// behind. The group id stays reserved by the kernel while any member lives,
// so the group kill cannot hit an unrelated process group.
func (h *Host) stop(p *proc) {
	p.once.Do(func() {
		p.ctl.stopping.Store(true)
		p.client.Kill()
		if err := killGroup(p.pid); err != nil {
			h.logger.Warn("kill plugin process group", "plugin", p.key, "pgid", p.pid, "error", err)
		}
	})
}

// stopNow ends one plugin for a host process that is about to exit: SIGKILL
// to its process group and its socket directory removed, without waiting
// for the plugin to be reaped (the exit does that).
func (h *Host) stopNow(p *proc) {
	p.once.Do(func() {
		p.ctl.stopping.Store(true)
		if err := killGroup(p.pid); err != nil {
			h.logger.Warn("kill plugin process group", "plugin", p.key, "pgid", p.pid, "error", err)
		}
		if dir := p.ctl.getSocketDir(); dir != "" {
			_ = os.RemoveAll(dir)
		}
	})
}

// Close stops every plugin this Host started, with its process group, and
// makes later dispenses fail. Starts under way are waited for (at most the
// start timeout) and stopped. Close is idempotent.
func (h *Host) Close() { h.close(false) }

// Exit is Close for a process that exits right after: trust and guard
// plugins, which only answer calls and hold nothing a shutdown would
// release, are killed (process group, SIGKILL) without the graceful
// shutdown and without waiting for them to be reaped, which saves a
// millisecond or two at the end of every command. Sandbox, broker and
// egress plugins are stopped as by Close.
func (h *Host) Exit() { h.close(true) }

func (h *Host) close(exiting bool) {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.launches.Wait()

	h.mu.Lock()
	var procs []*proc
	for key, s := range h.slots {
		if s.proc != nil {
			procs = append(procs, s.proc)
		}
		delete(h.slots, key)
	}
	var dedicated []*Dedicated
	for d := range h.dedicated {
		dedicated = append(dedicated, d)
	}
	h.mu.Unlock()

	var wg sync.WaitGroup
	for _, d := range dedicated {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.Stop()
		}()
	}
	for _, p := range procs {
		if exiting && (p.kind == plugin.KindTrust || p.kind == plugin.KindGuard) {
			h.stopNow(p)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.stop(p)
		}()
	}
	wg.Wait()
}
