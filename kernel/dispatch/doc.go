// Package dispatch is the kernel's fail-closed pipeline. One function,
// (*Kernel).Run, owns the order of the stages (README.md, Architecture):
//
//	config → lockfile integrity → installed artifact hash → trust (plugin) →
//	minimum trust → placement → Guard policy → rate limit → inspector plugins →
//	prompt → audit decision record (fsync) → execute → audit outcome record
//
// Each stage is a small function on *state that either returns nil or an
// error carrying a reason code. An error, a panic or a timeout in any stage is
// a deny with a reason code and an audit record; there is no path from a
// failed stage to execution.
//
// The pipeline decides; it does not run tools. Execute hands the decision
// as a kernel/plan.Plan to the executor cmd/agentnode wired in for the
// package type (Kernel.Executors: executor/toolpack, executor/agent,
// executor/mcpserver, each on the host or sandbox backend of
// executor/backend it builds for the placement the plan names),
// and the kernel keeps the order and the audit: decision record (fsync)
// before, outcome record after. What an executor asks of the kernel while
// it runs (an agent's tool and LLM calls, the audit of an MCP server's
// sealed egress) goes through plan.Services (services.go, egress.go),
// where the decisions and records stay.
//
// It is the centre of the trusted core: the only code that decides whether a
// call runs, and where.
package dispatch
