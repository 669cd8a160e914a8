package sandboxtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/sandbox/profile"
)

// egressHost is the CONNECT target of egress-reaches-host: reserved, never
// resolvable, so only the suite's socket can answer it.
const egressHost = "sandboxtest.invalid"

// egressServer stands in for the host's CONNECT proxy: a unix socket that
// answers a CONNECT request line with 200 and a nonce header, then echoes
// the tunnel. It records the request lines and counts connections.
type egressServer struct {
	dir, path string
	nonce     string
	l         net.Listener
	n         atomic.Int64
	done      chan struct{}

	mu       sync.Mutex
	requests []string
}

func newEgressServer() (*egressServer, error) {
	dir, err := os.MkdirTemp("", "sandboxtest-egress-")
	if err != nil {
		return nil, fmt.Errorf("sandboxtest: %w", err)
	}
	s := &egressServer{dir: dir, path: filepath.Join(dir, "egress.sock"), nonce: randomHex(12), done: make(chan struct{})}
	if s.l, err = net.Listen("unix", s.path); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sandboxtest: egress socket: %w", err)
	}
	// The sandbox user (uid 1000) connects through the mounted socket.
	if err := os.Chmod(s.path, 0o666); err != nil {
		s.l.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sandboxtest: egress socket: %w", err)
	}
	go s.serve()
	return s, nil
}

func (s *egressServer) serve() {
	defer close(s.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := s.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.n.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.handle(c)
		}()
	}
}

func (s *egressServer) handle(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(io.LimitReader(c, 1<<20))
	line, err := r.ReadString('\n')
	if err != nil {
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, strings.TrimRight(line, "\r\n"))
	s.mu.Unlock()
	for {
		h, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if strings.TrimRight(h, "\r\n") == "" {
			break
		}
	}
	if _, err := fmt.Fprintf(c, "HTTP/1.1 200 Connection established\r\nX-Sandboxtest-Nonce: %s\r\n\r\n", s.nonce); err != nil {
		return
	}
	_, _ = io.Copy(c, r)
}

// sawRequest reports whether a request line starting with prefix arrived.
func (s *egressServer) sawRequest(prefix string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.requests, func(r string) bool { return strings.HasPrefix(r, prefix) })
}

func (s *egressServer) close() {
	s.l.Close()
	<-s.done
	os.RemoveAll(s.dir)
}

// egressCheck is a probeCheck run with Spec.EgressSocket set.
func egressCheck(name, what string, args func(h *harness) []string) check {
	return check{name: name, what: what, run: func(ctx context.Context, h *harness) outcome {
		var a []string
		if args != nil {
			a = args(h)
		}
		return judge(name, h.exec(ctx, name, runOpts{args: append([]string{name}, a...), egress: egressOn}), false)
	}}
}

// egressChecks are the checks of sealed egress (Spec.EgressSocket).
var egressChecks = []check{
	{name: "egress-absent", what: "without Spec.EgressSocket nothing of egress is there: no proxy variables, no forwarder listening, no socket mounted", run: checkEgressAbsent},
	{name: "egress-exit-code", what: "with egress the command's exit status is still the run's (probe exit 7 → ExitCode 7)", run: checkEgressExitCode},
	egressCheck("egress-proxy-env", "with egress HTTPS_PROXY, https_proxy, HTTP_PROXY and http_proxy are "+profile.EgressProxyURL+" and NO_PROXY, no_proxy are empty", func(*harness) []string {
		return []string{profile.EgressProxyURL}
	}),
	{name: "egress-reaches-host", what: "with egress a connection to $HTTPS_PROXY reaches the host's egress socket, both ways", run: checkEgressReachesHost},
	egressCheck("egress-net-only-lo", "with egress the only network interface is still lo", nil),
	{name: "egress-no-other-way", what: "with egress the host's TCP services (127.0.0.1, its own address), its abstract unix sockets, the metadata service and public DNS are still unreachable", run: checkEgressNoOtherWay},
	egressCheck("egress-socket-mount", "with egress the host's socket is at "+profile.EgressSocketPath+", a read-only mount of a socket, with nothing creatable beside or below it", func(*harness) []string {
		return []string{profile.EgressSocketPath}
	}),
	{name: "egress-only-new-mount", what: "egress adds exactly one mount inside the container, the socket's", run: checkEgressOnlyNewMount},
	egressCheck("egress-pid1-confined", "with egress pid 1 is the forwarder, the command's parent, as confined as the command (uid/gid 1000, no capabilities, no_new_privs, seccomp)", func(*harness) []string {
		return []string{profile.EgressForwarderPath}
	}),
}

func checkEgressAbsent(ctx context.Context, h *harness) outcome {
	const name = "egress-absent"
	before := h.egress.n.Load()
	o := judge(name, h.exec(ctx, name, runOpts{args: []string{name, profile.EgressListenAddr, profile.EgressSocketPath}, egress: egressOff}), false)
	if n := h.egress.n.Load() - before; n > 0 {
		return fail("the egress socket accepted %d connection(s) during a run without egress; %s", n, o.detail)
	}
	return o
}

func checkEgressExitCode(ctx context.Context, h *harness) outcome {
	r := h.exec(ctx, "egress-exit-code", runOpts{args: []string{"exit", "7"}, egress: egressOn})
	switch {
	case r.err != nil || len(r.leftovers)+len(r.traces) > 0:
		return fail("%s", r.describe())
	case r.resp.ExitCode != 7 || r.resp.TimedOut || r.resp.Killed:
		return fail("probe exit 7 under the forwarder: %s", r.describe())
	case !r.resp.CleanupVerified:
		return fail("CleanupVerified is false: %s", r.describe())
	}
	return pass("exit 7 → ExitCode 7 under the forwarder, cleanup verified")
}

func checkEgressReachesHost(ctx context.Context, h *harness) outcome {
	const name = "egress-reaches-host"
	before := h.egress.n.Load()
	o := judge(name, h.exec(ctx, name, runOpts{args: []string{name, egressHost}, egress: egressOn}), false)
	switch {
	case !o.ok:
		return o
	case h.egress.n.Load() == before:
		return fail("the host's egress socket saw no connection, yet the probe says it got through: %s", o.detail)
	case !h.egress.sawRequest("CONNECT " + egressHost + ":443 "):
		return fail("the host's egress socket never saw the probe's CONNECT request: %s", o.detail)
	case !strings.Contains(o.detail, h.egress.nonce):
		return fail("the answer the probe got lacks the host's nonce: %s", o.detail)
	}
	return o
}

func checkEgressNoOtherWay(ctx context.Context, h *harness) outcome {
	const name = "egress-no-other-way"
	args := []string{name, h.abstractID, "127.0.0.1:" + h.loopback.port()}
	ls := []*countingListener{h.loopback, h.abstract}
	if h.hostIPL != nil {
		args = append(args, net.JoinHostPort(h.hostIP, h.hostIPL.port()))
		ls = append(ls, h.hostIPL)
	}
	before := make([]int64, len(ls))
	for i, l := range ls {
		before[i] = l.n.Load()
	}
	o := judge(name, h.exec(ctx, name, runOpts{args: args, egress: egressOn}), false)
	for i, l := range ls {
		if n := l.n.Load() - before[i]; n > 0 {
			return fail("the host listener %s accepted %d connection(s) during an egress run; %s", l.l.Addr(), n, o.detail)
		}
	}
	return o
}

// mountPoints runs the probe's mounts helper and returns what it printed.
func (h *harness) mountPoints(ctx context.Context, name string, egress egressMode) ([]string, runResult, error) {
	r := h.exec(ctx, name, runOpts{args: []string{"mounts"}, egress: egress})
	if r.err != nil || r.resp.ExitCode != 0 || len(r.leftovers)+len(r.traces) > 0 {
		return nil, r, errors.New("the run failed")
	}
	var points []string
	line, _, _ := strings.Cut(string(r.stdout.bytes()), "\n")
	if err := json.Unmarshal([]byte(line), &points); err != nil {
		return nil, r, fmt.Errorf("the probe's mount list: %w", err)
	}
	return points, r, nil
}

func checkEgressOnlyNewMount(ctx context.Context, h *harness) outcome {
	const name = "egress-only-new-mount"
	without, r, err := h.mountPoints(ctx, name, egressOff)
	if err != nil {
		return fail("without egress: %v: %s", err, r.describe())
	}
	with, r, err := h.mountPoints(ctx, name, egressOn)
	if err != nil {
		return fail("with egress: %v: %s", err, r.describe())
	}
	// A multiset difference: the same point mounted twice counts twice.
	count := map[string]int{}
	for _, p := range with {
		count[p]++
	}
	for _, p := range without {
		count[p]--
	}
	var added, removed []string
	for p, n := range count {
		for ; n > 0; n-- {
			added = append(added, p)
		}
		for ; n < 0; n++ {
			removed = append(removed, p)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	if !slices.Equal(added, []string{profile.EgressSocketPath}) || len(removed) > 0 {
		return fail("egress added mounts %q and removed %q; want only %s added", added, removed, profile.EgressSocketPath)
	}
	return pass("%d mounts without egress, %d with: only %s added", len(without), len(with), profile.EgressSocketPath)
}

// EgressSocket returns the path of a listening unix socket the sandbox user
// may connect to (mode 0666 in a private directory), removed when tb ends.
// Backends use it to test how they map Spec.EgressSocket; nothing answers.
func EgressSocket(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "sandboxtest-egress-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	p := filepath.Join(dir, "egress.sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	if err := os.Chmod(p, 0o666); err != nil {
		tb.Fatal(err)
	}
	return p
}
