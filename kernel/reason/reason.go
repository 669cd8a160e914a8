// Package reason holds the stable reason codes of specs/cli.md, the
// sentinel errors that carry them, and the exit code each maps to.
//
// Every refusal in the kernel is an error that wraps one of the sentinels, so
// errors.Is(err, reason.ErrPolicyDenied) works through any amount of %w
// wrapping and CodeOf(err) recovers the code for the audit record and the
// CLI's JSON output.
//
// It is in the trusted core because every refusal and every audit record
// carries one of its codes.
package reason

import (
	"errors"
	"fmt"
)

// Code is a stable reason code string.
type Code string

// The reason codes of specs/cli.md.
const (
	NotSetUp                      Code = "not_set_up"
	ConfigInvalid                 Code = "config_invalid"
	LockfileError                 Code = "lockfile_error"
	IntegrityDenied               Code = "integrity_denied"
	ArtifactMismatch              Code = "artifact_mismatch"
	TrustBelowMinimum             Code = "trust_below_minimum"
	TrustUnavailable              Code = "trust_unavailable"
	SandboxUnavailable            Code = "sandbox_unavailable"
	SandboxRuntimeUnavailable     Code = "sandbox_runtime_unavailable" // the chosen runtime (gvisor) cannot run
	ImageUnpinned                 Code = "image_unpinned"
	ImageDigestMismatch           Code = "image_digest_mismatch"
	PolicyDenied                  Code = "policy_denied"
	PolicyPrompt                  Code = "policy_prompt"
	RateLimited                   Code = "rate_limited"
	InputDenied                   Code = "input_denied"
	PluginUnavailable             Code = "plugin_unavailable"
	PluginUnpinned                Code = "plugin_unpinned"
	AuditUnavailable              Code = "audit_unavailable"
	Timeout                       Code = "timeout"
	CredentialsMissing            Code = "credentials_missing"
	AgentSandboxDisabled          Code = "agent_sandbox_disabled"
	HostAgentExecutionUnsupported Code = "host_agent_execution_unsupported"
	MCPNotPreinstalled            Code = "mcp_not_preinstalled"
	MCPUnpinned                   Code = "mcp_unpinned"
	EgressDenied                  Code = "egress_denied"
	// KilledMemory: the tool ran and was killed by the kernel for going
	// past its memory limit (the sandbox's cgroup OOM killer).
	KilledMemory Code = "killed_memory"
	// RuntimeUnsupported: the package's runtime is not one this version of
	// agentnode runs for its package type (no policy decided it).
	RuntimeUnsupported Code = "runtime_unsupported"
	// WorkspaceInvalid: the directory given with --workspace cannot be a
	// workspace (missing, not a directory, the root, a system tree, or
	// overlapping AGENTNODE_HOME). Nothing was decided or run.
	WorkspaceInvalid Code = "workspace_invalid"
)

// Codes lists every code, in the order of specs/cli.md (a test in specs/ keeps
// the two equal).
var Codes = []Code{
	NotSetUp, ConfigInvalid, LockfileError, IntegrityDenied, ArtifactMismatch, TrustBelowMinimum,
	TrustUnavailable, SandboxUnavailable, SandboxRuntimeUnavailable, ImageUnpinned, ImageDigestMismatch, PolicyDenied, PolicyPrompt,
	RateLimited, InputDenied, PluginUnavailable, PluginUnpinned, AuditUnavailable, Timeout,
	CredentialsMissing, AgentSandboxDisabled, HostAgentExecutionUnsupported, MCPNotPreinstalled,
	MCPUnpinned, EgressDenied, KilledMemory, RuntimeUnsupported, WorkspaceInvalid,
}

// Exit codes of specs/cli.md.
const (
	ExitOK      = 0
	ExitFailed  = 1 // the tool ran and failed, or a verify found problems
	ExitUsage   = 2 // usage or configuration error
	ExitRefused = 3 // refused: policy/trust/integrity, or no sandbox
)

// ExitCode maps a reason code to the process exit code. Configuration
// problems are exit 2; a timeout or a kill for memory means the tool ran and
// failed (1); every other code is a refusal (3).
func (c Code) ExitCode() int {
	switch c {
	case NotSetUp, ConfigInvalid, LockfileError, WorkspaceInvalid:
		return ExitUsage
	case Timeout, KilledMemory:
		return ExitFailed
	case "":
		return ExitFailed
	}
	return ExitRefused
}

// Error is an error carrying a reason code. A zero Msg and nil Err make it a
// sentinel; errors.Is matches any *Error with the same code against a
// sentinel.
type Error struct {
	Code Code
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	switch {
	case e.Msg != "":
		return e.Msg
	case e.Err != nil:
		return e.Err.Error()
	}
	return string(e.Code)
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel for e's code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Msg == "" && t.Err == nil && t.Code == e.Code
}

// New returns an error with code and a formatted message. Use %w in format to
// keep a cause; with several %w every one of them stays reachable through
// errors.Is and errors.As (the formatted error is kept whole, since
// errors.Unwrap of a multi-%w error is nil).
func New(code Code, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	var cause error
	switch err.(type) {
	case interface{ Unwrap() error }, interface{ Unwrap() []error }:
		cause = err
	}
	return &Error{Code: code, Msg: err.Error(), Err: cause}
}

// Wrap returns err with code attached and msg as context. A nil err yields
// nil.
func Wrap(code Code, err error, msg string) error {
	if err == nil {
		return nil
	}
	if msg != "" {
		msg += ": "
	}
	return &Error{Code: code, Msg: msg + err.Error(), Err: err}
}

// CodeOf returns the outermost reason code in err's chain, or "" if none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Sentinels, one per code.
var (
	ErrNotSetUp                      = &Error{Code: NotSetUp}
	ErrConfigInvalid                 = &Error{Code: ConfigInvalid}
	ErrLockfileError                 = &Error{Code: LockfileError}
	ErrIntegrityDenied               = &Error{Code: IntegrityDenied}
	ErrArtifactMismatch              = &Error{Code: ArtifactMismatch}
	ErrTrustBelowMinimum             = &Error{Code: TrustBelowMinimum}
	ErrTrustUnavailable              = &Error{Code: TrustUnavailable}
	ErrSandboxUnavailable            = &Error{Code: SandboxUnavailable}
	ErrSandboxRuntimeUnavailable     = &Error{Code: SandboxRuntimeUnavailable}
	ErrImageUnpinned                 = &Error{Code: ImageUnpinned}
	ErrImageDigestMismatch           = &Error{Code: ImageDigestMismatch}
	ErrPolicyDenied                  = &Error{Code: PolicyDenied}
	ErrPolicyPrompt                  = &Error{Code: PolicyPrompt}
	ErrRateLimited                   = &Error{Code: RateLimited}
	ErrInputDenied                   = &Error{Code: InputDenied}
	ErrPluginUnavailable             = &Error{Code: PluginUnavailable}
	ErrPluginUnpinned                = &Error{Code: PluginUnpinned}
	ErrAuditUnavailable              = &Error{Code: AuditUnavailable}
	ErrTimeout                       = &Error{Code: Timeout}
	ErrCredentialsMissing            = &Error{Code: CredentialsMissing}
	ErrAgentSandboxDisabled          = &Error{Code: AgentSandboxDisabled}
	ErrHostAgentExecutionUnsupported = &Error{Code: HostAgentExecutionUnsupported}
	ErrMCPNotPreinstalled            = &Error{Code: MCPNotPreinstalled}
	ErrMCPUnpinned                   = &Error{Code: MCPUnpinned}
	ErrEgressDenied                  = &Error{Code: EgressDenied}
	ErrKilledMemory                  = &Error{Code: KilledMemory}
	ErrRuntimeUnsupported            = &Error{Code: RuntimeUnsupported}
	ErrWorkspaceInvalid              = &Error{Code: WorkspaceInvalid}
)
