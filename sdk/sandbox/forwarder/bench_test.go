package main

import (
	"io"
	"net"
	"os"
	"os/exec"
	"testing"
)

// The forwarder next to what it wraps: a connection straight to the unix
// socket, and running the command without it.

var greeting = len("hello from the host\n")

func benchConnect(b *testing.B, dial func() (net.Conn, error)) {
	buf := make([]byte, greeting)
	b.ReportAllocs()
	for b.Loop() {
		c, err := dial()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// forwarding starts serve in-process on a loopback port in front of srv.
func forwarding(b *testing.B, srv *echoServer) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	go serve(l, srv.path)
	return l.Addr().String()
}

// BenchmarkConnect: connection set-up plus the server's first bytes.
func BenchmarkConnect(b *testing.B) {
	srv := newEchoServer(b)
	b.Run("direct-unix", func(b *testing.B) {
		benchConnect(b, func() (net.Conn, error) { return net.Dial("unix", srv.path) })
	})
	addr := forwarding(b, srv)
	b.Run("forwarded", func(b *testing.B) {
		benchConnect(b, func() (net.Conn, error) { return net.Dial("tcp", addr) })
	})
}

// BenchmarkThroughput: 1 MiB through the echo server and back.
func BenchmarkThroughput(b *testing.B) {
	srv := newEchoServer(b)
	const n = 1 << 20
	payload := make([]byte, n)
	run := func(b *testing.B, dial func() (net.Conn, error)) {
		c, err := dial()
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		buf := make([]byte, n)
		if _, err := io.ReadFull(c, buf[:greeting]); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(2 * n)
		for b.Loop() {
			go c.Write(payload)
			if _, err := io.ReadFull(c, buf); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("direct-unix", func(b *testing.B) {
		run(b, func() (net.Conn, error) { return net.Dial("unix", srv.path) })
	})
	addr := forwarding(b, srv)
	b.Run("forwarded", func(b *testing.B) {
		run(b, func() (net.Conn, error) { return net.Dial("tcp", addr) })
	})
}

// BenchmarkStart: /bin/true on its own and under the forwarder (which is
// this test binary, so its start-up is a little heavier than the real one).
func BenchmarkStart(b *testing.B) {
	srv := newEchoServer(b)
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("forwarder", func(b *testing.B) {
		self, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			cmd := exec.Command(self, "-listen", "127.0.0.1:0", "-socket", srv.path, "--", "/bin/true")
			cmd.Env = append(os.Environ(), asEnv+"=forwarder")
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
