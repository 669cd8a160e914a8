package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/hashcache"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/kernel/lockfile"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/ownlimits"
	"github.com/agentnode/agentnode/kernel/plan"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/policy"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/kernel/validcache"
	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/treewatch"
)

// Placements.
const (
	PlacementHost    = plan.PlacementHost
	PlacementSandbox = plan.PlacementSandbox
	PlacementNone    = plan.PlacementNone
)

// Kernel runs tool calls through the pipeline. The zero value is not usable;
// fill HomeDir and Plugins.
type Kernel struct {
	// HomeDir is AGENTNODE_HOME.
	HomeDir string
	// ConfigPath is the config file (home.ConfigPath(HomeDir) if empty).
	ConfigPath string
	// Plugins launches and supervises plugin processes.
	Plugins *pluginhost.Host
	// Environ is the caller's environment (os.Environ form). It feeds the
	// environment context and, filtered, the host executor.
	Environ []string
	// Interactive is true only when a human can answer a prompt (a TTY and
	// no CI / AGENTNODE_NON_INTERACTIVE).
	Interactive bool
	// Root is true when running as uid 0.
	Root bool
	// Ask asks the user a yes/no question on the TTY. nil means no prompt is
	// possible (treated as "no"). The question carries text the kernel did
	// not write (a package's name, an inspector's reason) unescaped: Ask
	// must make it safe for the terminal it prints on (cmd/agentnode's
	// askTTY escapes it with termsafe).
	Ask func(question string) (bool, error)
	// Warn receives warnings (stderr). May be nil.
	Warn io.Writer
	// StageTimeout bounds each automated stage (default 15s).
	StageTimeout time.Duration
	// PromptTimeout bounds the prompt stage (default 5m).
	PromptTimeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Executors are the executors that run what the pipeline decided,
	// each on the backend it builds for the plan's placement, and the
	// host backend's answers to placement (kernel/plan; cmd/agentnode
	// wires executor.Registry in, and `agentnode mcp serve` an mcp_server
	// executor that keeps servers running across calls). Without an executor for a package
	// type, an allowed call of it fails closed after its decision record.
	Executors *plan.Registry
	// Trace, when set, is called after each stage and audit record write ("audit_decision", "audit_outcome").
	Trace func(what string, start time.Time, err error)
	// Seals (`mcp serve`): an installed tree verified and watched unchanged since is not re-hashed (sdk/treewatch).
	Seals *treewatch.Seals
}

// Request is one tool call.
type Request struct {
	Package string
	Tool    string
	Input   json.RawMessage
	// DryRun decides and reports, audits nothing, runs nothing and
	// consumes no rate limit. Its decision is "prompt" when a run would
	// need approval.
	DryRun bool
	// Workspace is the directory the user named with --workspace ("":
	// none). It is checked again here (ResolveWorkspace) and granted from
	// the package's permissions.filesystem.level (workspace.go).
	Workspace string

	// viaAgent is the package id of the agent whose run_tool made this
	// call ("" for a call from the CLI or MCP): its guard.agent_overrides
	// entry pre-approves action types in the policy stage.
	viaAgent string
}

// Result describes what happened to a request. It is filled as far as the
// pipeline got, also on a deny.
type Result struct {
	RequestID  string          `json:"request_id"`
	Decision   string          `json:"decision"`
	Code       string          `json:"code,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Package    string          `json:"package"`
	Version    string          `json:"version,omitempty"`
	Tool       string          `json:"tool"`
	Actions    []string        `json:"actions,omitempty"`
	Trust      string          `json:"trust,omitempty"`
	Placement  string          `json:"placement"`
	Backend    string          `json:"backend,omitempty"`
	Runtime    string          `json:"runtime,omitempty"` // sandbox runtime: native | gvisor
	GuardChain []string        `json:"guard_chain,omitempty"`
	Risk       int             `json:"risk"`
	RiskBand   string          `json:"risk_band,omitempty"`
	Warnings   []string        `json:"warnings,omitempty"`
	DryRun     bool            `json:"dry_run,omitempty"`
	Ran        bool            `json:"ran"`
	ExitCode   *int            `json:"exit_code,omitempty"`
	OK         *bool           `json:"ok,omitempty"`
	Output     json.RawMessage `json:"result,omitempty"`
	Error      string          `json:"error,omitempty"`
	DurationMS *int64          `json:"duration_ms,omitempty"`
	// Workspace is what the run was given of the workspace it named (nil
	// when it named none).
	Workspace *WorkspaceGrant `json:"workspace,omitempty"`
	Stderr    string          `json:"-"`
}

// state is what the stages share.
type state struct {
	k        *Kernel
	req      *Request
	res      *Result
	set      *settings
	pkg      *store.Package
	tool     *manifest.Tool
	actions  []policy.Action
	env      policy.Env
	verdict  policy.Verdict // combined Guard verdict so far
	denyCode reason.Code    // code to use if verdict ends as deny
	denyWhy  string
	log      *audit.Log
	img      *image.Image    // resolved sandbox image (sandbox placement)
	sandbox  *sandbox.Client // the backend that said it is available
	// lockTrust is the trust_level of the package's verified lockfile
	// entry ("" if none); lockNote is the lockfile warning for the audit
	// record's reason (lockfile.go).
	lockTrust, lockNote string
	// loaded is the installed package as the lockfile stage read it (its
	// metadata and manifest; nil if it did not), reused by the artifact stage.
	loaded *store.Package
	// confineNote says how a host tool is confined when that is less than
	// fully ("unconfined: landlock unavailable"), for the audit records'
	// reason (confine.go).
	confineNote string
	// input is the validation of the input against the tool's input
	// schema for the inspectors (inputcheck.go); nil without inspectors.
	input *inputCheck
	// lockEntry is the package's lockfile entry when it verified and names
	// the installed version and artifact (nil otherwise); mcp is the
	// checked launch of an mcp_server package (mcp.go).
	lockEntry *lockfile.Value
	mcp       *plan.MCPLaunch
	// prestarted says what prestart has started (warm.go).
	prestarted struct{ evaluators, pkg bool }
	// workspacePath is the request's workspace, resolved (workspace.go).
	workspacePath string
}

// stage is one step of the pipeline. code is used for errors that carry no
// reason code of their own (including panics and timeouts).
type stage struct {
	name    string
	code    reason.Code
	run     func(ctx context.Context, st *state) error
	timeout func(st *state) time.Duration // default: Kernel.StageTimeout
}

// decisionStages are the stages before the audit decision record, in order.
// This list is the pipeline's order; nothing else orders stages.
var decisionStages = []stage{
	{name: "config", code: reason.ConfigInvalid, run: stageConfig},
	{name: "lockfile", code: reason.LockfileError, run: stageLockfile},
	{name: "artifact", code: reason.ArtifactMismatch, run: stageArtifact},
	{name: "trust", code: reason.PluginUnavailable, run: stageTrust},
	{name: "minimum_trust", code: reason.TrustBelowMinimum, run: stageMinimumTrust},
	{name: "placement", code: reason.SandboxUnavailable, run: stagePlacement},
	{name: "policy", code: reason.PolicyDenied, run: stagePolicy},
	{name: "rate_limit", code: reason.RateLimited, run: stageRateLimit},
	{name: "inspectors", code: reason.PluginUnavailable, run: stageInspectors},
	{name: "prompt", code: reason.PolicyPrompt, run: stagePrompt, timeout: func(st *state) time.Duration { return st.k.promptTimeout() }},
}

// executeStage runs the tool; its deadline is the tool timeout plus time to
// kill and clean up.
var executeStage = stage{name: "execute", code: reason.PluginUnavailable, run: stageExecute,
	timeout: func(st *state) time.Duration { return st.set.timeout + 30*time.Second }}

// verdicts is where the kernel remembers the documents it validated
// (kernel/validcache): config.json and installed manifests are validated
// against their schemas once, not on every run.
func (k *Kernel) verdicts() *validcache.Cache {
	return validcache.Open(home.VerdictsDir(k.HomeDir))
}

// store is the package store, remembering validated manifests and the
// digests of installed files (kernel/hashcache).
func (k *Kernel) store() *store.Store {
	hashes := hashcache.Shared(filepath.Join(home.StateDir(k.HomeDir), store.HashCacheFile))
	return store.Open(home.PackagesDir(k.HomeDir)).WithVerdicts(k.verdicts()).WithHashes(hashes)
}

func (k *Kernel) stageTimeout() time.Duration {
	if k.StageTimeout > 0 {
		return k.StageTimeout
	}
	return 15 * time.Second
}

func (k *Kernel) promptTimeout() time.Duration {
	if k.PromptTimeout > 0 {
		return k.PromptTimeout
	}
	return 5 * time.Minute
}

func (k *Kernel) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

func (k *Kernel) warn(st *state, msg string) {
	st.res.Warnings = append(st.res.Warnings, msg)
	if k.Warn != nil {
		fmt.Fprintf(k.Warn, "agentnode: warning: %s\n", msg)
	}
}

// Run decides a request and, if allowed, executes it. The returned error is
// non-nil exactly when the request was refused or could not be completed; it
// carries the reason code. The Result is always non-nil.
func (k *Kernel) Run(ctx context.Context, req *Request) (*Result, error) {
	st := &state{
		k:   k,
		req: req,
		res: &Result{
			RequestID: audit.NewRequestID(),
			Package:   req.Package,
			Tool:      req.Tool,
			Placement: PlacementNone,
			DryRun:    req.DryRun,
		},
		verdict: policy.Allow,
	}
	defer func() {
		if st.log != nil {
			_ = st.log.Close()
		}
	}()

	if req.Workspace != "" {
		ws, err := ResolveWorkspace(req.Workspace, k.HomeDir)
		if err != nil {
			return st.res, k.deny(st, err)
		}
		st.workspacePath = ws
	}
	for _, s := range decisionStages {
		if err := runStage(ctx, k, s, st); err != nil {
			return st.res, k.deny(st, err)
		}
		st.prestart() // warm.go: the plugins what is known so far says the run will call
	}
	st.grantWorkspace()
	st.res.Decision = string(policy.Allow)
	if req.DryRun {
		if st.verdict == policy.Prompt {
			// A run would ask (or, non-interactive, refuse): say so.
			st.res.Decision, st.res.Reason = string(policy.Prompt), "approval required: "+st.denyWhy
		}
		return st.res, nil
	}
	if err := k.recordDecision(st); err != nil {
		// The decision could not be made durable: nothing runs.
		st.res.Decision = string(policy.Deny)
		st.res.Code = string(reason.CodeOf(err))
		st.res.Reason = err.Error()
		return st.res, err
	}
	execErr := runStage(ctx, k, executeStage, st)
	if execErr != nil {
		st.res.Code = string(reason.CodeOf(execErr))
		st.res.Reason = execErr.Error()
	}
	if err := k.recordOutcome(st); err != nil {
		// The outcome is not on record: say so with its code, whatever
		// the run's own result was.
		st.res.Code = string(reason.CodeOf(err))
		st.res.Reason = err.Error()
		return st.res, err
	}
	return st.res, execErr
}

// runStage runs one stage with a deadline, turning a panic or a timeout into
// an error with the stage's code, and an uncoded error into one.
func runStage(ctx context.Context, k *Kernel, s stage, st *state) (err error) {
	if k.Trace != nil {
		defer func(t0 time.Time) { k.Trace(s.name, t0, err) }(time.Now())
	}
	d := k.stageTimeout()
	if s.timeout != nil {
		d = s.timeout(st)
	}
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- reason.New(s.code, "internal error in stage %s: %v\n%s", s.name, p, debug.Stack())
			}
		}()
		done <- s.run(sctx, st)
	}()
	select {
	case err := <-done:
		if err != nil && reason.CodeOf(err) == "" {
			err = reason.Wrap(s.code, err, "stage "+s.name)
		}
		return err
	case <-sctx.Done():
	}
	// The stage did not return in time (or the caller gave up). It holds
	// st, which deny and the audit records read next: wait until it has
	// returned. Stages honour their context, and what cannot (a TTY
	// prompt, awaitCtx) runs apart from st, so this wait is short. Its
	// result, whatever it is, is not used: the stage failed.
	<-done
	if ctx.Err() != nil {
		return reason.New(s.code, "stage %s was interrupted: %w", s.name, ctx.Err())
	}
	return reason.New(s.code, "stage %s did not finish within %s: %w", s.name, d, sctx.Err())
}

// awaitCtx runs f on a goroutine of its own and returns its result, or
// ctx's error as soon as ctx ends. For a call that cannot be interrupted
// (a question on the TTY): f must not touch the pipeline's state, since it
// may still run after awaitCtx returned.
func awaitCtx[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				var zero T
				ch <- result{zero, fmt.Errorf("internal error: %v", p)}
			}
		}()
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// ask puts a yes/no question to the user (Kernel.Ask) until ctx ends.
func (k *Kernel) ask(ctx context.Context, q string) (bool, error) {
	ask := k.Ask
	return awaitCtx(ctx, func() (bool, error) { return ask(q) })
}

// deny finalizes a refusal: fills the result and writes the decision record
// (unless dry run). A failure to audit the refusal is reported as a warning;
// the request is refused either way.
func (k *Kernel) deny(st *state, err error) error {
	st.res.Decision = string(policy.Deny)
	st.res.Code = string(reason.CodeOf(err))
	st.res.Reason = err.Error()
	if st.req.DryRun {
		return err
	}
	if aerr := k.recordDecision(st); aerr != nil {
		k.warn(st, "the refusal could not be audited: "+aerr.Error())
	}
	return err
}

// openAudit opens the audit log. Before the config is loaded, it only opens
// an audit directory that already exists (so a machine that was never set up
// is not half set up by a refusal).
func (k *Kernel) openAudit(st *state) (*audit.Log, error) {
	if st.log != nil {
		return st.log, nil
	}
	dir := home.AuditDir(k.HomeDir)
	if st.set == nil {
		if _, err := os.Stat(dir); err != nil {
			return nil, reason.New(reason.AuditUnavailable, "no audit log at %s: %w", dir, err)
		}
	}
	l, err := audit.Open(dir, k.auditOptions(st))
	if err != nil {
		return nil, err
	}
	st.log = l
	return l, nil
}

// auditOptions are the audit log's options: the configured rotation and
// the anchor, sealed with the lockfile seal key (specs/audit.md).
func (k *Kernel) auditOptions(st *state) audit.Options {
	var opts audit.Options
	if st.set != nil {
		opts = st.set.auditOpts
	}
	opts.Anchor = audit.HomeAnchor(home.AuditAnchorPath(k.HomeDir))
	return opts
}

func (k *Kernel) baseRecord(st *state, event string) *audit.Record {
	r := st.res
	return &audit.Record{
		Event:      event,
		RequestID:  r.RequestID,
		Package:    r.Package,
		Version:    r.Version,
		Tool:       r.Tool,
		Action:     joinActions(st.actions),
		Trust:      r.Trust,
		Placement:  r.Placement,
		Backend:    r.Backend,
		Decision:   r.Decision,
		Code:       r.Code,
		Reason:     truncate(st.recordReason(), 512),
		GuardChain: r.GuardChain,
		Env: audit.Env{CI: st.env.CI, Interactive: st.env.Interactive,
			SecretsPresent: st.env.SecretsPresent, Root: st.env.Root},
		Workspace: r.Workspace.String(),
		Runtime:   r.Runtime,
	}
}

func (k *Kernel) recordDecision(st *state) (err error) {
	if k.Trace != nil {
		defer func(t0 time.Time) { k.Trace("audit_decision", t0, err) }(time.Now())
	}
	l, err := k.openAudit(st)
	if err != nil {
		return err
	}
	limitsErr := restoreOwnLimits()
	if err := l.Append(k.baseRecord(st, "decision")); err != nil {
		return reason.Wrap(reason.AuditUnavailable, errors.Join(err, limitsErr), "write decision record")
	}
	return nil
}

func (k *Kernel) recordOutcome(st *state) (err error) {
	if k.Trace != nil {
		defer func(t0 time.Time) { k.Trace("audit_outcome", t0, err) }(time.Now())
	}
	rec := k.baseRecord(st, "outcome")
	rec.ExitCode = st.res.ExitCode
	rec.DurationMS = st.res.DurationMS
	limitsErr := restoreOwnLimits()
	if err := st.log.Append(rec); err != nil {
		return reason.Wrap(reason.AuditUnavailable, errors.Join(err, limitsErr), "write outcome record (the tool already ran)")
	}
	return nil
}

// restoreOwnLimits puts agentnode's resource limits back to what they were
// at start before an audit record is written (kernel/ownlimits): a
// host tool that lowered its parent's RLIMIT_FSIZE or RLIMIT_NOFILE (its
// seccomp filter refuses that; this is the second line) cannot stop the
// record. The error says what could not be restored, for the message of a
// write that fails all the same.
func restoreOwnLimits() error {
	_, err := ownlimits.Restore()
	return err
}

func joinActions(as []policy.Action) string {
	s := ""
	for i, a := range as {
		if i > 0 {
			s += ","
		}
		s += string(a)
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// errStageUnavailable marks stages whose capability arrives in a later
// version; they deny.
var errStageUnavailable = errors.New("not available in this version of agentnode")
