// Command agentnode-egress-proxy is the bundled egress plugin: the sealed
// egress CONNECT proxy, the only way out of a sandbox whose lockfile entry
// seals `mcp_allowed_domains` (specs/egress.md). It is built on sdk/ only
// and runs as a pinned plugin process of its own, one per MCP server
// session, so that the HTTP parsing of what sandboxed code sends happens
// here and never inside agentnode. agentnode starts it, sends the sealed
// allowlist (sdk/egress.StartRequest), writes the audit record of every
// Event the proxy reports and acknowledges it, and closes the session after
// the server; this process never touches the audit log.
//
// # Mechanism
//
// Start creates a fresh 0700 directory under Config.SocketDir and listens on
// a unix socket inside it. The sandbox backend bind-mounts that one socket
// file into the container (which has no network but loopback), a tiny
// forwarder inside relays a loopback port to it, and HTTPS_PROXY points at the
// forwarder, so one mechanism serves every backend and none needs a bridge
// network. The socket file itself is mode 0666: a bind mount exposes the file,
// not the directory, so the file's own mode is what the sandbox user (uid/gid
// 1000, or whatever a user namespace maps it to) is checked against; on the
// host the 0700 directory keeps every other user out.
//
// # Rules (the facts file's, checked in this order)
//
//   - Only HTTP/1.x CONNECT; anything else is refused with 405 (absolute-form
//     GET included: the proxy never sees or forwards HTTP payload).
//   - The target is authority-form host:443. Port 443 is the only port; IP
//     literals (v4, v6, bracketed, or numeric forms such as 127.1 or
//     2130706433), userinfo, paths, and non-ASCII are refused. The host is
//     compared exactly, case-insensitively and without one trailing dot, with
//     the allowlist: no wildcard or suffix match. A CONNECT with a body
//     (Content-Length, Transfer-Encoding) is refused; other headers (Host
//     included) are ignored and never forwarded: only the request line
//     names the destination.
//   - The proxy resolves the name itself (with a timeout) and refuses the
//     request if any resolved address is not public (see nonPublic: loopback,
//     RFC 1918, link-local incl. 169.254.169.254, CGNAT, TEST-NETs,
//     benchmarking, multicast, broadcast, reserved, ULA, IPv6 link/site-local,
//     documentation, Teredo, 6to4, IPv4-compatible, and IPv4-mapped or NAT64
//     forms of non-public IPv4 addresses; IPv6 must be global unicast
//     2000::/3 or NAT64 of a public IPv4 address).
//   - It then dials the checked IP, never the name, so a DNS answer that
//     changes between check and connect (rebinding) cannot redirect it.
//   - Bytes are spliced both ways with an idle timeout; headers must arrive
//     within a deadline (slowloris) and within a size cap; concurrent
//     connections are capped and the excess is refused with 503.
//
// Every accepted connection yields exactly one decision Event (allow, or
// deny, which agentnode records with reason code egress_denied) before the
// destination is contacted at all (the decision precedes the dial), and an
// allowed one a second Event (closed) with byte counts when it ends. Events
// carry host, port, address and reason, never payload or headers. An audit
// callback that fails (agentnode could not write the record, or the session
// to agentnode is gone) refuses the connection (fail closed).
//
// Close stops accepting, closes every connection, waits for every connection
// goroutine, removes the socket and the directory, and returns an error unless
// it verified all of that (no listener, no connection goroutine, no socket
// file, no directory).
//
// # Test-only destinations
//
// Tests need a destination that works, and every local one is non-public.
// Built with the `egresstest` tag (and only then) the package exports
// PermitForTest, which adds prefixes to a set of addresses the public check
// lets through. Without the tag no such set, variable, environment variable
// or config exists: nothing a user can flip. Port 443 stays mandatory either
// way (the tests bind 443 on a random 127/8 address as root).
//
// ValidateDomains checks allowlist entries (see specs/egress.md).
package main
