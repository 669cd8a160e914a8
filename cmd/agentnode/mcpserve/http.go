package mcpserve

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPPath is the path the Streamable HTTP endpoint is served at.
const HTTPPath = "/mcp"

// ErrRemoteAddr refuses a listen address that is not loopback without
// HTTPOptions.AllowRemote (`--http-allow-remote`).
var ErrRemoteAddr = errors.New("not a loopback address")

// HTTPOptions configure RunHTTP.
type HTTPOptions struct {
	// Token is the bearer token every request must carry
	// (Authorization: Bearer <Token>); required.
	Token string
	// Hosts are names accepted in the Host header and in Origin besides
	// localhost and the loopback addresses (`--http-host`).
	Hosts []string
	// AllowRemote accepts, in the Host header, the non-loopback address
	// the listener is bound to (`--http-allow-remote`).
	AllowRemote bool
}

// ListenAddr checks an `--http` address and returns the one to listen on:
// an empty host or "localhost" is 127.0.0.1; any other host must be a
// loopback IP address unless allowRemote, and a port is required.
func ListenAddr(addr string, allowRemote bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--http %q: want HOST:PORT (e.g. 127.0.0.1:8765, or :0 for any free port): %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("--http %q: port %q: %w", addr, port, err)
	}
	switch strings.ToLower(host) {
	case "", "localhost":
		return net.JoinHostPort("127.0.0.1", port), nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return addr, nil
	}
	if !allowRemote {
		return "", fmt.Errorf("--http %q: %w: the server would be reachable from other machines; "+
			"use a loopback address (127.0.0.1:PORT), or add --http-allow-remote to mean it", addr, ErrRemoteAddr)
	}
	return addr, nil
}

// RunHTTP refreshes the tool list and serves MCP over Streamable HTTP on
// ln until ctx is done. Each HTTP session is one MCP session of this
// Server (same plugin host, same kept MCP servers). Every request passes,
// in this order: the Host and Origin check (403), the bearer token (401),
// the size bound MaxFrame (413).
//
// When ctx is done: the listener is closed and new requests are answered
// 503; the requests in flight (tool calls) finish, up to DrainTimeout, and
// their responses are delivered; then the remaining connections (the
// clients' event streams) are closed. RunHTTP returns nil then. It does
// not close the plugin host (Close does).
func (s *Server) RunHTTP(ctx context.Context, ln net.Listener, o HTTPOptions) error {
	if o.Token == "" {
		return errors.New("http: no token")
	}
	if err := s.Refresh(); err != nil {
		s.logf("%v", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if s.opts.PollInterval > 0 {
		go s.watch(ctx)
	}
	d := &drain{}
	hs := &http.Server{
		Handler:           s.httpHandler(ln.Addr(), o, d),
		ReadHeaderTimeout: 30 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	d.close()
	hs.SetKeepAlivesEnabled(false)
	go func() { _ = hs.Shutdown(context.Background()) }() // closes the listener and idle connections
	drained := make(chan struct{})
	go func() {
		d.wg.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(s.opts.DrainTimeout):
		s.logf("HTTP requests still running after %s; closing their connections", s.opts.DrainTimeout)
	}
	_ = hs.Close()
	return nil
}

// httpHandler is the guarded Streamable HTTP handler for a listener bound
// to bound.
func (s *Server) httpHandler(bound net.Addr, o HTTPOptions, d *drain) http.Handler {
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		// hostGuard checks Host (and Origin), with the configured names.
		DisableLocalhostProtection: true,
		// The SDK answers 413 for a body that is larger (chunked too).
		MaxRequestBodyBytes: MaxFrame,
	})
	want := []byte(o.Token)
	bearer := auth.RequireBearerToken(func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if subtle.ConstantTimeCompare([]byte(token), want) != 1 {
			return nil, auth.ErrInvalidToken
		}
		// One user: the session-hijacking check (same user per session)
		// has nothing to tell apart.
		return &auth.TokenInfo{UserID: "agentnode"}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := w.(challenge); ok {
			w = c.ResponseWriter // the SDK's event streams need its Flush
		}
		if r.ContentLength > MaxFrame {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", MaxFrame), http.StatusRequestEntityTooLarge)
			return
		}
		if !d.enter(r.Method != http.MethodGet) { // a GET is the client's event stream: not waited for
			w.Header().Set("Connection", "close")
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		defer d.leave(r.Method != http.MethodGet)
		sdk.ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	checked := bearer(inner)
	mux.HandleFunc(HTTPPath, func(w http.ResponseWriter, r *http.Request) { checked.ServeHTTP(challenge{w}, r) })
	return hostGuard(bound, o, mux)
}

// challenge adds the RFC 6750 challenge to a 401.
type challenge struct{ http.ResponseWriter }

func (c challenge) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		c.Header().Set("WWW-Authenticate", `Bearer realm="agentnode mcp"`)
	}
	c.ResponseWriter.WriteHeader(code)
}

// hostGuard answers 403 to a request whose Host is not the server's or
// whose Origin (when sent) is not a loopback or configured one: a web page
// cannot reach the server through DNS rebinding (its Host is the page's
// name) nor from a foreign origin.
func hostGuard(bound net.Addr, o HTTPOptions, next http.Handler) http.Handler {
	var boundIP net.IP
	boundPort := ""
	if ta, ok := bound.(*net.TCPAddr); ok {
		boundIP, boundPort = ta.IP, strconv.Itoa(ta.Port)
	}
	names := map[string]bool{"localhost": true}
	for _, h := range o.Hosts {
		names[strings.ToLower(strings.TrimSuffix(h, "."))] = true
	}
	hostOK := func(hostport string) bool {
		host, port, err := net.SplitHostPort(hostport)
		if err != nil { // no port
			host, port = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), ""
		}
		if port != "" && port != boundPort {
			return false
		}
		host = strings.ToLower(strings.TrimSuffix(host, "."))
		if names[host] {
			return true
		}
		ip := net.ParseIP(host)
		switch {
		case ip == nil:
			return false
		case ip.IsLoopback():
			return boundIP == nil || boundIP.IsLoopback() || boundIP.IsUnspecified()
		case o.AllowRemote:
			// An address is not a name a page can rebind: accept the
			// bound one (any, when bound to all interfaces).
			return boundIP != nil && (boundIP.Equal(ip) || boundIP.IsUnspecified())
		}
		return false
	}
	originOK := func(origin string) bool {
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return false
		}
		host := strings.ToLower(u.Hostname())
		if names[host] {
			return true
		}
		ip := net.ParseIP(host)
		return ip != nil && ip.IsLoopback()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostOK(r.Host) {
			http.Error(w, fmt.Sprintf("Forbidden: Host %q is not this server's (add it with --http-host)", r.Host), http.StatusForbidden)
			return
		}
		for _, origin := range r.Header.Values("Origin") {
			if !originOK(origin) {
				http.Error(w, fmt.Sprintf("Forbidden: Origin %q is not a loopback origin", origin), http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// drain counts the requests in flight so a shutdown can wait for them.
// Add is never called once closing is set (both under mu), so Wait is
// sound.
type drain struct {
	mu      sync.Mutex
	closing bool
	wg      sync.WaitGroup
}

func (d *drain) enter(counted bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return false
	}
	if counted {
		d.wg.Add(1)
	}
	return true
}

func (d *drain) leave(counted bool) {
	if counted {
		d.wg.Done()
	}
}

func (d *drain) close() {
	d.mu.Lock()
	d.closing = true
	d.mu.Unlock()
}
