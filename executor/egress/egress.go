// Package egress starts the sealed egress proxy of one sandbox: a CONNECT
// proxy in a pinned egress plugin process of its own
// (agentnode-egress-proxy, plugins/egress/proxy), allowing the sealed
// domains on port 443 alone (specs/egress.md). Its users are the MCP server
// executor (executor/mcpserver: a server whose verified lockfile entry
// seals mcp_allowed_domains) and `agentnode install` resolving Python
// dependencies from an index (cmd/agentnode/pydeps).
//
// It sits outside the kernel because it is execution: it starts a helper
// process, hands its socket to the sandbox and proves its teardown.
// Everything the sandbox sends is parsed in the plugin's process, never in
// agentnode's. The kernel keeps the decision (the sealed allowlist, sealed
// egress for the sandbox alone) and gives what the audit is opened with
// (plan.Services.EgressAudit); the auditor here (OpenAudit, audit.go)
// builds the record of each connection the proxy reports over its session,
// checks every allow against the sealed allowlist again, and writes the
// record through the audit log (kernel/audit) before the proxy goes on;
// a record that cannot be written refuses the connection.
// A proxy process that dies, breaks the protocol or reports an allow
// outside the allowlist fails the session (Failed), and a teardown that is
// not verified (by the plugin, then here: no socket, no directory) is
// egress_denied.
package egress

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/egress"
)

// proxyName is the egress plugin a proxy starts: agentnode-egress-proxy.
// egresstest builds (egresstest.go) start
// agentnode-egress-proxy-egresstest, the same plugin built with the tag.
var proxyName = "proxy"

// testDestinations, when set, gives the test-only destinations the proxy
// is started with (egress.StartRequest.TestHosts, TestPermit). Only
// egresstest builds set it; in every other build nothing can change the
// proxy's resolver or its public-address check (and a release plugin
// refuses such a request anyway).
var testDestinations func() (hosts, permit string)

// closeTimeout bounds the wait for the plugin's answer to close (its own
// teardown waits at most a few seconds for connections to end).
const closeTimeout = 15 * time.Second

// socketDir is where the proxy creates its private 0700 directory: the
// temporary directory, or /tmp when that path would make the socket path
// longer than a unix socket path may be.
func socketDir() string {
	dir := os.TempDir()
	// egress-NNNNNNNNNN/proxy.sock below it; 107 bytes at most in all.
	if !filepath.IsAbs(dir) || len(dir)+len("/"+egress.DirPrefix+"0123456789/")+len(egress.SocketName) > 107 {
		return "/tmp"
	}
	return dir
}

// Options are the inputs of Start.
type Options struct {
	// Plugins starts the egress plugin process.
	Plugins *pluginhost.Host
	// Audit is the audit of this proxy's events (OpenAudit); Start
	// takes it over (Stop, or a failed Start, closes it).
	Audit Auditor
	// What names the caller in errors ("package pack-id").
	What string
	// Domains are the hosts allowed, on port 443 (checked by the kernel
	// against manifest's allowed-domain rules).
	Domains []string
}

// Proxy is a running sealed egress proxy.
type Proxy struct {
	sock   string
	failed chan struct{}
	pid    int
	audit  Auditor
	stop   func() error
}

// Start starts the egress plugin with o.Domains and a session whose every
// event goes through o.Audit before the proxy acts on it.
func Start(ctx context.Context, o Options) (*Proxy, error) {
	if o.Plugins == nil {
		_ = o.Audit.Close()
		return nil, reason.New(reason.PluginUnavailable, "%s: no plugin host for the egress proxy", o.What)
	}
	client, proc, err := o.Plugins.EgressProxy(proxyName)
	if err != nil {
		_ = o.Audit.Close()
		return nil, fmt.Errorf("%s: sealed egress: %w", o.What, err)
	}
	req := &egress.StartRequest{Allowed: o.Domains, SocketDir: socketDir()}
	if testDestinations != nil {
		req.TestHosts, req.TestPermit = testDestinations()
	}
	// startCtx bounds the start only: the session lives until Stop (which
	// after the sandbox ended still learns whether the teardown was
	// verified).
	startCtx, cancelStart := context.WithTimeout(ctx, o.Plugins.CallTimeout())
	sess, err := client.Start(startCtx, req, o.Audit.Audit)
	cancelStart()
	if err != nil {
		proc.Stop()
		_ = o.Audit.Close()
		return nil, reason.New(reason.EgressDenied, "%s: start the egress proxy: %w", o.What, err)
	}
	failed := make(chan struct{})
	go func() {
		select {
		case <-sess.Done():
		case <-o.Audit.Violated():
		}
		close(failed)
	}()
	p := &Proxy{sock: sess.SocketPath(), failed: failed, pid: proc.PID(), audit: o.Audit}
	p.stop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		var errs []error
		if err := sess.Close(ctx); err != nil {
			errs = append(errs, err)
		}
		// The process and its group go in any case; nothing of the
		// proxy can be left running after this.
		proc.Stop()
		if err := o.Audit.Violation(); err != nil {
			errs = append(errs, err)
		}
		if err := removeLeftovers(p.sock); err != nil {
			errs = append(errs, err)
		}
		_ = o.Audit.Close()
		if len(errs) > 0 {
			return reason.New(reason.EgressDenied, "%s: the egress proxy could not prove its teardown: %w", o.What, errors.Join(errs...))
		}
		return nil
	}
	return p, nil
}

// Socket is the proxy's unix socket, to pass as sandbox.Spec.EgressSocket.
func (p *Proxy) Socket() string { return p.sock }

// Failed is closed when the proxy failed while serving (its plugin died,
// broke the protocol, or reported an allow outside the allowlist): what
// uses it must stop. Stop closes it too.
func (p *Proxy) Failed() <-chan struct{} { return p.failed }

// Denied lists the connections the proxy refused so far, as their audit
// records' reasons ("host:port: why").
func (p *Proxy) Denied() []string { return p.audit.Denied() }

// PID is the plugin process.
func (p *Proxy) PID() int { return p.pid }

// Stop closes the proxy and ends its plugin process; it returns
// egress_denied unless the teardown was verified and the proxy did its
// job (no allow outside the allowlist). Call it once.
func (p *Proxy) Stop() error { return p.stop() }

// removeLeftovers checks, with the plugin process gone, that neither the
// socket nor its directory is left (sdk/egress checked that sock is
// egress.SocketName in an egress.DirPrefix directory under the socket
// directory). What a crashed plugin left is removed — the socket and the
// empty directory, nothing else — and reported.
func removeLeftovers(sock string) error {
	var errs []error
	dir := filepath.Dir(sock)
	if _, err := os.Lstat(sock); err == nil {
		errs = append(errs, fmt.Errorf("socket %s was left", sock))
		if err := os.Remove(sock); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := os.Lstat(dir); err == nil {
		errs = append(errs, fmt.Errorf("socket directory %s was left", dir))
		if err := os.Remove(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
