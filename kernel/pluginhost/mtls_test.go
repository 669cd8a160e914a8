package pluginhost

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentnode/agentnode/sdk/plugin"
)

// pluginAddr returns the socket a running plugin serves on.
func pluginAddr(t *testing.T, h *Host, kind, name string) net.Addr {
	t.Helper()
	h.mu.Lock()
	s := h.slots[Key(kind, name)]
	h.mu.Unlock()
	if s == nil || s.proc == nil {
		t.Fatal("plugin not running")
	}
	rc := s.proc.client.ReattachConfig()
	if rc == nil || rc.Addr == nil {
		t.Fatal("no plugin address")
	}
	return rc.Addr
}

// dialPlugin opens a TLS connection to the plugin with the given client
// certificates (none: no client certificate) and reports what the server
// presented and whether the connection is usable (the server rejects a
// client certificate after the TLS 1.3 handshake, on the first read).
func dialPlugin(t *testing.T, addr net.Addr, certs []tls.Certificate) (*tls.ConnectionState, error) {
	t.Helper()
	raw, err := net.DialTimeout(addr.Network(), addr.String(), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, Certificates: certs, NextProtos: []string{"h2"}})
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if err := c.Handshake(); err != nil {
		return nil, err
	}
	st := c.ConnectionState()
	// HTTP/2 preface, then read: a rejected client certificate surfaces here.
	if _, err := c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		return &st, err
	}
	_, err = c.Read(make([]byte, 1))
	return &st, err
}

// The plugin's socket speaks TLS 1.3 with a P-256 certificate and accepts
// only the host's client certificate: no certificate and a stranger's
// self-signed one are both refused; the credentials never appear in the
// plugin's environment.
func TestPluginMutualTLS(t *testing.T) {
	e := newEnv(t, "ok", true)
	h := e.host(t, Options{})
	c, err := h.Trust(context.Background(), "faulty")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := evaluate(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	addr := pluginAddr(t, h, plugin.KindTrust, "faulty")

	st, err := dialPlugin(t, addr, nil)
	if err == nil {
		t.Fatal("a client without a certificate was served")
	}
	if st != nil {
		if st.Version != tls.VersionTLS13 {
			t.Errorf("TLS version %x, want 1.3", st.Version)
		}
		pub, ok := st.PeerCertificates[0].PublicKey.(*ecdsa.PublicKey)
		if !ok || pub.Curve != elliptic.P256() {
			t.Errorf("server key %T, want ECDSA P-256", st.PeerCertificates[0].PublicKey)
		}
	}
	certPEM, keyPEM, err := newCert(0)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dialPlugin(t, addr, []tls.Certificate{stranger}); err == nil {
		t.Fatal("a stranger's client certificate was accepted")
	}
	// The host's own certificate is accepted (the check above can fail).
	host, _, err := hostClientCert()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dialPlugin(t, addr, []tls.Certificate{host}); err != nil && !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("the host's certificate was refused: %v", err)
	}
	env, err := os.ReadFile("/proc/" + strconv.Itoa(h.PID(plugin.KindTrust, "faulty")) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(env), "PRIVATE KEY") || strings.Contains(string(env), "CERTIFICATE") {
		t.Fatal("TLS credentials in the plugin's environment")
	}
}
