// Command forwarder is the sandbox's egress forwarder, built to
// bin/agentnode-forwarder and baked into the sandbox image at
// /usr/libexec/agentnode/egress-forwarder (profile.EgressForwarderPath) by
// `agentnode sandbox build`, so the image digest pins it.
//
// When a run has sealed egress (sandbox.Spec.EgressSocket), every backend
// mounts the host's egress socket at /run/agentnode/egress.sock and starts
// the container as
//
//	egress-forwarder -listen 127.0.0.1:3128 -socket /run/agentnode/egress.sock -- ARGV...
//
// with HTTPS_PROXY=http://127.0.0.1:3128 (and friends) in the environment.
// The forwarder listens on the container's loopback, copies every TCP
// connection to a new connection on the unix socket (the host's CONNECT
// proxy decides what may pass; the forwarder is a dumb pipe, so a tool that
// talks to the socket directly gains nothing), and runs ARGV as its child.
// The network namespace keeps only lo: there is no other way out.
//
// With -max-active N (1 to 256) it forwards at most N connections at once
// and leaves the next ones unaccepted, in the listen backlog, until one
// ends: a client that opens a connection per request, all at once, is
// slowed down instead of refused (`agentnode install --npm-registry` runs
// npm behind a second forwarder started so; cmd/agentnode/npmdeps).
// Without it, more than 256 at once are closed.
//
// It is the container's pid 1: it forwards SIGTERM, SIGINT, SIGHUP,
// SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH to the child, reaps every process
// reparented to it (it is also a child subreaper, so this holds when it is
// not pid 1), and exits with the child's status as a shell reports it
// (128+N when the child was killed by signal N) as soon as the child ends;
// the kernel then kills whatever is left in the pid namespace. It marks
// itself non-dumpable, so the tool (same uid) cannot read or write its
// memory through /proc. It runs as the container's user with no
// capabilities and needs none.
//
// Exit statuses of its own: 125 when it cannot start (bad arguments, the
// port is taken), 127 when ARGV[0] is not found, 126 when it cannot be
// executed. It writes its own errors to stderr, prefixed
// "agentnode-egress-forwarder:".
//
// It uses only the standard library and is built with CGO_ENABLED=0,
// -trimpath, -buildvcs=false and -ldflags '-s -w', so the same toolchain
// and source always give the same bytes (and the same image digest).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// exitUsage is the status when the forwarder cannot start.
	exitUsage = 125
	// exitNotExecutable and exitNotFound are the shell's statuses.
	exitNotExecutable = 126
	exitNotFound      = 127
	// maxConns bounds the connections forwarded at once; more are closed
	// at once (the host proxy has its own limits).
	maxConns = 256
	// dialTimeout bounds connecting to the host socket.
	dialTimeout = 10 * time.Second
	// maxLogLines bounds what the forwarder writes to the tool's stderr.
	maxLogLines = 20
	// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER (Linux 3.4), which
	// package syscall lacks.
	prSetChildSubreaper = 36
)

// forwarded are the signals passed on to the child. SIGCHLD, SIGPIPE and
// SIGURG (the Go runtime's preemption signal) are not; SIGKILL and SIGSTOP
// cannot be caught.
var forwarded = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH,
}

func main() { os.Exit(run(os.Args[1:])) }

// logf writes one line to stderr, at most maxLogLines in all.
var logged atomic.Int32

func logf(format string, args ...any) {
	if logged.Add(1) <= maxLogLines {
		fmt.Fprintf(os.Stderr, "agentnode-egress-forwarder: "+format+"\n", args...)
	}
}

// run is main without the exit: it returns the exit status.
func run(args []string) int {
	fl := flag.NewFlagSet("agentnode-egress-forwarder", flag.ContinueOnError)
	listen := fl.String("listen", "", "TCP address to listen on inside the container (127.0.0.1:PORT)")
	sock := fl.String("socket", "", "the unix socket to forward every connection to")
	maxActive := fl.Int("max-active", 0, "forward at most `N` connections at once; later ones wait, unaccepted, until one ends (0: up to 256, more are closed)")
	if err := fl.Parse(args); err != nil {
		return exitUsage
	}
	argv := fl.Args()
	switch {
	case *listen == "" || *sock == "":
		logf("-listen and -socket are required")
		return exitUsage
	case len(argv) == 0 || argv[0] == "":
		logf("no command to run (usage: -listen ADDR -socket PATH [-max-active N] -- ARGV...)")
		return exitUsage
	case *maxActive < 0 || *maxActive > maxConns:
		logf("-max-active %d: want 0 to %d", *maxActive, maxConns)
		return exitUsage
	}
	if host, _, err := net.SplitHostPort(*listen); err != nil || !net.ParseIP(host).IsLoopback() {
		logf("-listen %q: want a loopback address and port", *listen)
		return exitUsage
	}

	// Reap orphans even when not pid 1, and keep the tool out of this
	// process's memory.
	if err := prctl(prSetChildSubreaper, 1); err != nil {
		logf("becoming a child subreaper: %v", err)
		return exitUsage
	}
	_ = prctl(syscall.PR_SET_DUMPABLE, 0)

	// Listen before the tool starts, so the proxy is there from its first
	// instruction and the tool cannot take the port.
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		logf("%v", err)
		return exitUsage
	}
	if *maxActive > 0 {
		go serveQueued(l, *sock, *maxActive)
	} else {
		go serve(l, *sock)
	}

	path, err := lookPath(argv[0])
	if err != nil {
		logf("%v", err)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
			return exitNotFound
		}
		return exitNotExecutable
	}
	// Installed before the start so that no signal is lost in between.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	child, err := os.StartProcess(path, argv, &os.ProcAttr{Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
	if err != nil {
		logf("%v", err)
		if errors.Is(err, fs.ErrNotExist) {
			return exitNotFound
		}
		return exitNotExecutable
	}
	status := make(chan syscall.WaitStatus, 1)
	go reap(child.Pid, status)
	for {
		select {
		case s := <-sigs:
			// Through the child's pidfd: never a recycled pid.
			_ = child.Signal(s)
		case ws := <-status:
			return exitStatus(ws)
		}
	}
}

// lookPath resolves a command without a slash through PATH, as execvp
// does; a path is used as is.
func lookPath(name string) (string, error) {
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			return name, nil
		}
	}
	return exec.LookPath(name)
}

// reap waits for every child, adopted orphans included, and sends the
// status of pid (the command) once it has ended.
func reap(pid int, status chan<- syscall.WaitStatus) {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			// ECHILD with the command not yet reaped cannot happen; do not
			// spin if it does.
			logf("wait: %v", err)
			status <- syscall.WaitStatus(exitUsage << 8)
			return
		case got == pid:
			status <- ws
			return
		}
	}
}

// exitStatus is the status a shell reports for ws.
func exitStatus(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

func prctl(option, arg uintptr) error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, option, arg, 0); e != 0 {
		return e
	}
	return nil
}

// serve forwards every connection accepted on l to a new connection on the
// unix socket sock, at most maxConns at once, until l is closed.
func serve(l net.Listener, sock string) {
	sem := make(chan struct{}, maxConns)
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and friends: back off instead of spinning.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		select {
		case sem <- struct{}{}:
			go func() {
				defer func() { <-sem }()
				forward(c, sock)
			}()
		default:
			logf("more than %d connections at once; closing one", maxConns)
			c.Close()
		}
	}
}

// serveQueued is serve for a client that opens more connections at once
// than it should, each for one exchange (npm 9 behind a proxy opens a
// tunnel for every tarball, all at once, pooling none): it forwards at
// most n at once and accepts the next only when one has ended, so the
// others wait in the listen backlog (no descriptor of this process, and
// the client sees a slow proxy, not a refusal). The host proxy's own cap
// on concurrent connections then holds it back no more.
func serveQueued(l net.Listener, sock string, n int) {
	sem := make(chan struct{}, n)
	for {
		sem <- struct{}{}
		c, err := l.Accept()
		if err != nil {
			<-sem
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		go func() {
			defer func() { <-sem }()
			forward(c, sock)
		}()
	}
}

// halfCloser is a connection whose write side can be shut on its own.
type halfCloser interface {
	net.Conn
	CloseWrite() error
}

// forward copies c to a new connection on sock and back until both sides
// are done, passing each side's end of stream on as a half-close.
func forward(c net.Conn, sock string) {
	defer c.Close()
	u, err := net.DialTimeout("unix", sock, dialTimeout)
	if err != nil {
		logf("connecting to the egress socket: %v", err)
		return
	}
	defer u.Close()
	var wg sync.WaitGroup
	pipe := func(dst halfCloser, src net.Conn) {
		defer wg.Done()
		if _, err := io.Copy(dst, src); err != nil {
			// A reset or a failed write: end both directions.
			c.Close()
			u.Close()
			return
		}
		_ = dst.CloseWrite()
	}
	tc, ok1 := c.(halfCloser)
	uc, ok2 := u.(halfCloser)
	if !ok1 || !ok2 {
		return
	}
	wg.Add(2)
	go pipe(uc, tc)
	go pipe(tc, uc)
	wg.Wait()
}
