// Package mcpserve is `agentnode mcp serve`: a long-lived MCP server
// (github.com/modelcontextprotocol/go-sdk) that exposes the installed tools
// as MCP tools, every call through the kernel pipeline
// ((*dispatch.Kernel).Run), so any MCP client gets sandboxed, guarded and
// audited tools.
//
// What is exposed (Scan): every tool of every installed toolpack with
// runtime exec or python, and every declared tool of every installed mcp_server
// package that is preinstalled and pinned (specs/mcp.md), under the MCP
// name "<package>__<tool>". Package ids are
// [a-z0-9-]{3,60} and tool names [A-Za-z0-9_][A-Za-z0-9_.-]{0,63}, so the
// name is at most 126 characters of MCP's [A-Za-z0-9_.-] (limit 128), and
// the first "__" always ends the package id: two different tools never map
// to the same name (tool names are unique within a package). The
// description is the manifest's, inputSchema its input_schema as written
// (with "type":"object" added if it has no type; any other type is not
// exposed), outputSchema its output_schema when that describes an object.
// Not exposed, with the reason in `agentnode mcp status`: mcp_server
// packages that are not preinstalled or not pinned (mcp_not_preinstalled,
// mcp_unpinned), the tools an MCP server offers but its package does not
// declare (never listed, never called), agent packages (run with
// `agentnode run`), other runtimes, packages the store cannot read.
// Nothing about trust or policy is decided when listing.
//
// With `--package PKG` (Options.Package, Catalog.Only, ScanPackage) only
// PKG's tools are served, under their own names (a tool name is already a
// valid MCP name), so agentnode stands in for one server in a client's
// configuration unchanged; an unknown or not exposable package is refused
// before serving. When PKG is an mcp_server package its server's
// resources and prompts (list, templates, read, subscribe, get) are passed
// through too, each decided and audited like a call of a read tool named
// after the method (passthrough.go); otherwise they are not advertised.
//
// An mcp_server package's server is started at its first call, on the
// placement the kernel decides, and kept running for the next calls
// (executor/mcpserver.Servers, wired in as the kernel's mcp_server
// executor): each call still goes through the whole pipeline and the Guard
// proxy (executor/mcpproxy). A server that died, failed a call
// or timed out is replaced at the next call; Close stops them all.
//
// Per call: the kernel re-reads the config, re-checks the lockfile and
// checks the installed artifact — re-hashed at the first call and after
// any change the session's inotify seal saw (Kernel.Seals,
// sdk/treewatch; an artifact_mismatch stops the package's kept server) —
// then decides and audits exactly as
// `agentnode run` does. Calls are never interactive: a verdict of prompt is
// a deny (policy_prompt). What lives across calls is the plugin host (trust,
// guard, sandbox plugins are started once); after a refusal for a plugin or
// sandbox reason it is replaced, so a plugin pinned or fixed while serving
// is picked up by the next call. Results: an mcp_server package's server's
// CallToolResult as it sent it (executor/mcpserver.Passthrough, bounded
// by the output limit; the progress of the call forwarded), a toolpack's
// JSON result as text (and as structuredContent when it is an object); a refusal is a tool
// error "deny <code>: <reason>"; a tool that failed "tool failed: <error>";
// arguments that are not a JSON object are refused before the pipeline
// (like a bad --input, nothing audited). _meta carries
// agentnode/request_id (the audit records' request_id), agentnode/decision,
// agentnode/placement and agentnode/code.
//
// The stream (StdioTransport): newline-delimited JSON-RPC 2.0 read by a
// framing layer of ours in front of the go-sdk server, because the go-sdk's
// IOTransport ends the session on the first line it cannot decode (bad
// JSON, a wrong "jsonrpc", an id it cannot read, a batch in a 2025-06-18
// session) and cancels the calls still running when stdin closes. Each line
// is bounded (MaxFrame, MaxDepth) and classified: what is not a valid
// message is answered here (-32700, -32600, -32602, "id": null when the id
// cannot be read) in the client's terms, and only valid messages reach the
// go-sdk; its error answers that name Go types are reworded. Batches follow
// the session's MCP version (refused from 2025-06-18, which removed them;
// answered as one array before). At EOF the requests already read are
// answered first (their calls run to the end and are audited).
//
// Installs and removes while serving: tools/list re-reads the store, a
// tools/call of an unknown name re-reads it first, and the store directory
// is polled (1 s) so clients get notifications/tools/list_changed.
//
// Transports: Run serves one session on a transport (stdio in `mcp serve`);
// RunHTTP (http.go) serves Streamable HTTP (`mcp serve --http`), each HTTP
// session one MCP session of the same Server, behind a Host/Origin check
// against DNS rebinding, the bearer token of Token (token.go, a 0600 file
// in the home) and the MaxFrame size bound, and drains the calls in
// flight when it is stopped.
package mcpserve
