package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentnode/agentnode/cmd/agentnode/runtrace"
	"github.com/agentnode/agentnode/cmd/agentnode/termsafe"
	"github.com/agentnode/agentnode/executor"
	"github.com/agentnode/agentnode/executor/mcpproxy"
	"github.com/agentnode/agentnode/executor/mcpserver"
	"github.com/agentnode/agentnode/executor/toolio"
	"github.com/agentnode/agentnode/kernel/dispatch"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/treewatch"
)

// Options configure a Server.
type Options struct {
	// Kernel is the template of every call: HomeDir (required),
	// ConfigPath, Environ, Root, Warn, StageTimeout, PromptTimeout, Now.
	// Executors runs what was decided; its mcp_server executor is
	// replaced by the server's kept servers (executor.WithMCPServers).
	// Plugins, Interactive and Ask are the server's: the plugin host comes
	// from NewPlugins, and a call is never interactive (stdin is the MCP
	// stream, not a person), so every prompt is a deny (policy_prompt).
	Kernel dispatch.Kernel
	// NewPlugins returns a plugin host; called once at the first call and
	// again after a host was retired (see pluginPool).
	NewPlugins func() *pluginhost.Host
	// Version is the server version reported to clients.
	Version string
	// Log receives serve's own messages (stderr; nil: discarded).
	Log io.Writer
	// DrainTimeout bounds how long Close waits for calls still running
	// (their context is cancelled when the client goes away; a sandboxed
	// tool is then killed and its removal proven). Default 2 minutes.
	DrainTimeout time.Duration
	// PollInterval is how often the package store is checked for installs
	// and removals, which are announced with notifications/tools/list_changed
	// (default 1s; negative: never, tools/list still re-reads the store).
	PollInterval time.Duration
	// Package, if set, is the one package served (`--package`): its tools
	// under their own names (Catalog.Only). Check it with ScanPackage
	// before serving; a package removed while serving lists no tools.
	Package string
	// Workspace is the session's workspace (`--workspace`, resolved with
	// dispatch.ResolveWorkspace; "": none), named in every call's request.
	Workspace string
	// Trace, if set, receives the trace of every call (`--trace`): the
	// lines of `agentnode run --trace` (runtrace), each starting with
	// "agentnode: trace <request id>: ", written when the call returns.
	// Plugin launches are traced by the host NewPlugins makes
	// (runtrace.Launches); the calls to plugins are recorded in the
	// trace of the call that makes them.
	Trace io.Writer
	// WarmPool is the warm pool of prepared sandboxes toolpack calls let
	// the sandbox backend keep (sandbox.warm_pool; zero: none).
	WarmPool sandbox.WarmPool
}

// Server is a long-lived MCP server over the kernel. Create it with New,
// serve with Run, and Close it to stop the plugins.
type Server struct {
	opts    Options
	mcp     *mcp.Server
	plugins *pluginPool
	// servers keeps the mcp_server packages' servers running across
	// calls.
	servers *mcpserver.Servers
	// executors is Kernel.Executors with servers as its mcp_server
	// executor (nil when Kernel.Executors is).
	executors *plan.Registry

	// passResources: --package names an mcp_server package, whose
	// server's resources and prompts are passed through (passthrough.go).
	passResources bool

	// mu guards registered and serializes refreshes.
	mu         sync.Mutex
	registered map[string][]byte // MCP name -> JSON of the Tool it was registered from
}

// New returns a server that exposes the toolpacks installed under
// opts.Kernel.HomeDir.
func New(opts Options) *Server {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = time.Second
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 2 * time.Minute
	}
	if opts.NewPlugins == nil {
		homeDir := opts.Kernel.HomeDir
		opts.NewPlugins = func() *pluginhost.Host {
			return pluginhost.New(pluginhost.Options{HomeDir: homeDir, LogOutput: termsafe.NewWriter(os.Stderr)})
		}
	}
	servers := mcpserver.NewServers()
	if opts.Kernel.Seals == nil {
		// The installed trees verified for this session are watched, not
		// re-hashed on every call, while nothing changes in them.
		opts.Kernel.Seals = treewatch.NewSeals()
	}
	var executors *plan.Registry
	if opts.Kernel.Executors != nil {
		executors = executor.WithMCPServers(opts.Kernel.Executors, servers)
		if opts.WarmPool.Size > 0 {
			executors = executor.WithWarmPool(executors, opts.WarmPool)
		}
	}
	s := &Server{
		opts: opts,
		// A retired plugin host's sandbox may run MCP servers: they are
		// stopped (their containers removed) before it is closed.
		plugins:    &pluginPool{newHost: opts.NewPlugins, beforeClose: servers.StopFor},
		servers:    servers,
		executors:  executors,
		registered: map[string][]byte{},
	}
	// Advertise tools (with list_changed) even before any is installed;
	// with --package also the server's resources and prompts, passed
	// through (passthrough.go).
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	s.passResources = opts.Package != "" && isMCPServer(opts.Kernel.HomeDir, opts.Package)
	if s.passResources {
		caps.Resources, caps.Prompts = &mcp.ResourceCapabilities{Subscribe: true}, &mcp.PromptCapabilities{}
		caps.Completions = &mcp.CompletionCapabilities{}
	}
	sopts := &mcp.ServerOptions{
		Instructions: "Tools of the packages installed in agentnode. Every call is decided by agentnode's " +
			"pipeline (trust, placement, Guard policy, rate limits, inspectors), audited, and run on the " +
			"confined host or in the hardened sandbox. A refusal is a tool error \"deny <code>: <reason>\".",
		Capabilities: caps,
	}
	if s.passResources {
		sopts.SubscribeHandler, sopts.UnsubscribeHandler = s.subscribe, s.unsubscribe
		servers.OnResourceUpdated(s.resourceUpdated)
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "agentnode", Title: "agentnode", Version: opts.Version}, sopts)
	s.mcp.AddReceivingMiddleware(s.refreshing, s.passingThrough)
	return s
}

// Run refreshes the tool list and serves t until the client disconnects or
// ctx is done. It does not close the plugin host (Close does).
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	if err := s.Refresh(); err != nil {
		s.logf("%v", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if s.opts.PollInterval > 0 {
		go s.watch(ctx)
	}
	return s.mcp.Run(ctx, t)
}

// Connect serves one session on t in the background (tests, in-memory
// transports); Run is the usual entry point.
func (s *Server) Connect(ctx context.Context, t mcp.Transport) (*mcp.ServerSession, error) {
	if err := s.Refresh(); err != nil {
		s.logf("%v", err)
	}
	return s.mcp.Connect(ctx, t, nil)
}

// Close refuses new calls, waits (up to DrainTimeout) for the running ones
// to finish, and stops the plugin processes. It reports whether everything
// was stopped in time.
func (s *Server) Close() bool {
	s.plugins.close()
	done := make(chan struct{})
	go func() {
		s.plugins.open.Wait()
		s.servers.Close() // no call is running any more
		s.opts.Kernel.Seals.Close()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(s.opts.DrainTimeout):
		s.logf("calls still running after %s; exiting anyway", s.opts.DrainTimeout)
		return false
	}
}

func (s *Server) logf(format string, args ...any) {
	fmt.Fprintf(s.opts.Log, "agentnode mcp: "+format+"\n", args...)
}

// refreshing re-reads the store before tools/list, and before a tools/call
// of a name that is not registered (a package installed since the last
// list), so both see the store as it is now. A tools/list with a cursor
// continues a listing: only its first page re-reads the store, so a
// listing reads it once however many pages it has.
func (s *Server) refreshing(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		refresh := method == "tools/list"
		if p, ok := req.GetParams().(*mcp.ListToolsParams); ok && p != nil && p.Cursor != "" {
			refresh = false
		}
		if method == "tools/call" {
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p != nil {
				s.mu.Lock()
				_, known := s.registered[p.Name]
				s.mu.Unlock()
				refresh = !known
			}
		}
		if refresh {
			if err := s.Refresh(); err != nil {
				s.logf("%v", err)
			}
		}
		return next(ctx, method, req)
	}
}

// watch refreshes when the package store directory changes (install and
// remove rename entries in it); the SDK then sends
// notifications/tools/list_changed.
func (s *Server) watch(ctx context.Context) {
	dir := home.PackagesDir(s.opts.Kernel.HomeDir)
	last := stamp(dir)
	t := time.NewTicker(s.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if now := stamp(dir); now != last {
			last = now
			if err := s.Refresh(); err != nil {
				s.logf("%v", err)
			}
		}
	}
}

func stamp(dir string) string {
	fi, err := os.Stat(dir)
	if err != nil {
		return "absent"
	}
	return fi.ModTime().String()
}

// Refresh makes the registered tools match the store: adds new and changed
// tools, removes the ones that are gone. On an error the registered tools
// stay as they were (every call is re-checked by the kernel anyway).
func (s *Server) Refresh() error {
	c, err := Scan(s.opts.Kernel.HomeDir)
	if err != nil {
		return err
	}
	if s.opts.Package != "" {
		c = c.Only(s.opts.Package)
	}
	for _, p := range c.Problems {
		s.logf("not exposed: %s", p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, t := range c.Tools {
		seen[t.Name] = true
		fp, _ := json.Marshal(t)
		if old, ok := s.registered[t.Name]; ok && bytes.Equal(old, fp) {
			continue
		}
		s.mcp.AddTool(mcpTool(t), s.handler(t.Package, t.Tool))
		s.registered[t.Name] = fp
	}
	var gone []string
	for name := range s.registered {
		if !seen[name] {
			gone = append(gone, name)
			delete(s.registered, name)
		}
	}
	if len(gone) > 0 {
		s.mcp.RemoveTools(gone...)
	}
	return nil
}

func mcpTool(t Tool) *mcp.Tool {
	mt := &mcp.Tool{
		Name:        t.Name,
		Title:       t.Package + "/" + t.Tool,
		Description: t.Description,
		InputSchema: t.InputSchema,
	}
	if t.OutputSchema != nil {
		mt.OutputSchema = t.OutputSchema
	}
	return mt
}

func (s *Server) handler(pkg, tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args json.RawMessage
		if req != nil && req.Params != nil {
			args = req.Params.Arguments
			// The client's progress token: an mcp_server package's
			// server's progress of this call goes to it.
			// Sent with the request's context, so over HTTP it goes on
			// the request's stream.
			if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
				reqCtx := ctx
				ctx = mcpproxy.WithProgress(ctx, func(_ context.Context, p *mcp.ProgressNotificationParams) {
					c := *p
					c.ProgressToken = token
					_ = req.Session.NotifyProgress(reqCtx, &c)
				})
			}
		}
		return s.Call(ctx, pkg, tool, args), nil
	}
}

// Call runs one tool call through the kernel and converts the outcome. It
// never returns a protocol error and never panics: a refusal, a failed tool
// and an internal error are all tool errors (isError), so the client's model
// sees them and the server keeps serving.
func (s *Server) Call(ctx context.Context, pkg, tool string, args json.RawMessage) (res *mcp.CallToolResult) {
	defer func() {
		if p := recover(); p != nil {
			s.logf("internal error in %s/%s: %v\n%s", pkg, tool, p, debug.Stack())
			res = errorResult(fmt.Sprintf("error: internal error in agentnode: %v", p), nil)
		}
	}()
	input, err := toolio.Arguments(args)
	if err != nil {
		// Like `agentnode run --input '[1]'`: a usage error, decided before
		// the pipeline, so nothing is audited.
		return errorResult("bad arguments: "+err.Error(), nil)
	}
	out, raw, runErr := s.run(ctx, pkg, tool, input)
	if out == nil {
		return errorResult("deny "+string(reason.PluginUnavailable)+": the server is shutting down", nil)
	}
	return toResult(out, runErr, raw)
}

// run decides and runs one request through the kernel (a copy of the
// kernel per call, on a plugin host of the pool, never interactive) and
// returns its result and, for an mcp_server package, the server's own
// answer as JSON (mcpserver.Passthrough; nil when there is none). A nil
// result: the server is shutting down, nothing was decided.
func (s *Server) run(ctx context.Context, pkg, tool string, input json.RawMessage) (*dispatch.Result, json.RawMessage, error) {
	g, ok := s.plugins.acquire()
	if !ok {
		return nil, nil, nil
	}
	ctx, pt := mcpserver.WithPassthrough(ctx)
	k := s.opts.Kernel // a copy per call: the kernel keeps no per-call state of its own
	k.Plugins = g.host
	k.Executors = s.executors
	k.Interactive = false
	k.Ask = nil
	var tr *runtrace.Trace
	if s.opts.Trace != nil {
		tr = runtrace.NewCall()
		k.Trace = tr.Stage
		ctx = runtrace.WithTrace(ctx, tr)
	}
	out, runErr := k.Run(ctx, &dispatch.Request{Package: pkg, Tool: tool, Input: input, Workspace: s.opts.Workspace})
	if tr != nil {
		tr.PrintAs(s.opts.Trace, TracePrefix(out.RequestID))
	}
	s.plugins.release(g, runErr != nil && staleCodes[reason.CodeOf(runErr)])
	if reason.CodeOf(runErr) == reason.ArtifactMismatch {
		// Its installed tree changed: the server started from it stops.
		s.servers.Stop(pkg)
	}
	return out, pt.Result(), runErr
}

// TracePrefix starts each trace line of the call with request id id
// (Options.Trace).
func TracePrefix(id string) string { return "agentnode: trace " + id + ": " }

// MaxFrame bounds one inbound JSON-RPC message (one line) of `agentnode mcp
// serve` (StdioTransport): a tools/call carries at most plan.MaxInput bytes
// of arguments, the rest of a message is small. A longer line is answered
// -32600 and skipped. Messages nested deeper than MaxDepth are refused
// before decoding; arguments are checked against the input bounds
// (toolio.Arguments).
const MaxFrame = plan.MaxInput + 64<<10

// toResult converts a kernel outcome. The answer of an mcp_server
// package's server (raw, the CallToolResult it sent, isError included) is
// passed on as it is, with agentnode's _meta keys added. Otherwise, text
// forms:
//
//	ok:             the tool's JSON result (structuredContent too when it is an object)
//	refused:        deny <code>: <reason>
//	ran and failed: tool failed: <the tool's error>
//	ran, then an error (timeout, sandbox): error <code>: <reason>
func toResult(res *dispatch.Result, err error, raw json.RawMessage) *mcp.CallToolResult {
	meta := resultMeta(res, nil)
	if res != nil && err == nil && raw != nil {
		var r mcp.CallToolResult
		if json.Unmarshal(raw, &r) == nil {
			r.Meta = resultMeta(res, r.Meta)
			return &r
		}
	}
	switch {
	case res == nil:
		return errorResult(fmt.Sprintf("error: %v", err), meta)
	case err != nil && res.Decision != "allow":
		code := string(reason.CodeOf(err))
		if code == "" {
			code = res.Code
		}
		return errorResult(fmt.Sprintf("deny %s: %s", code, err.Error()), meta)
	case err != nil:
		code := string(reason.CodeOf(err))
		if code == "" {
			code = "error"
		}
		return errorResult(fmt.Sprintf("error %s: %s", code, err.Error()), meta)
	case res.OK == nil || !*res.OK:
		return errorResult("tool failed: "+res.Error, meta)
	}
	out := res.Output
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	r := &mcp.CallToolResult{Meta: meta, Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}}
	if b := bytes.TrimSpace(out); len(b) > 0 && b[0] == '{' {
		r.StructuredContent = json.RawMessage(b)
	}
	return r
}

// resultMeta is m (the server's _meta, or a new one) with agentnode's keys
// about the call res set.
func resultMeta(res *dispatch.Result, m mcp.Meta) mcp.Meta {
	if m == nil {
		m = mcp.Meta{}
	}
	if res != nil {
		m["agentnode/request_id"] = res.RequestID
		m["agentnode/decision"] = res.Decision
		m["agentnode/placement"] = res.Placement
		if res.Code != "" {
			m["agentnode/code"] = res.Code
		}
	}
	return m
}

func errorResult(text string, meta mcp.Meta) *mcp.CallToolResult {
	return &mcp.CallToolResult{Meta: meta, IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
