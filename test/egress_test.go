package test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// Test names of the sealed-egress scripts (egress.txtar): allowed.test is
// the sealed domain; other.test resolves to the same server but is not
// allowlisted; private.test resolves to a private address nobody permits.
const (
	egressAllowed = "allowed.test"
	egressOther   = "other.test"
	egressPrivate = "private.test"
	// egressPrivateAddr is an RFC 1918 address (never contacted: the proxy
	// refuses the name before dialling).
	egressPrivateAddr = "10.203.0.1"
)

// cmdTLSServer: tlsserver CAFILE HITSFILE [DIR] — a real HTTPS server on
// port 443 of a random 127/8 address (root), with a fresh self-signed
// certificate for the test names, written as PEM to CAFILE (the package's
// CA bundle). Every request it serves is appended to HITSFILE as
// "HOST PATH". With DIR it serves DIR's files (a PEP 503 package index:
// DIR/simple/NAME/index.html, which net/http serves for /simple/NAME/),
// and answers /redirect/REST with a redirect to https://other.test/REST;
// without, a greeting naming the server name. It sets, for the egresstest
// agentnode binary:
// AGENTNODE_EGRESSTEST_HOSTS (the three names), AGENTNODE_EGRESSTEST_PERMIT
// (the server's address only) and TLSADDR. The server stops with the script.
func cmdTLSServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: tlsserver CAFILE HITSFILE [DIR]")
	}
	var files http.Handler
	if len(args) == 3 {
		files = http.FileServer(http.Dir(ts.MkAbs(args[2])))
	}
	caFile, hitsFile := ts.MkAbs(args[0]), ts.MkAbs(args[1])
	cert, certPEM, err := egressCert()
	ts.Check(err)
	ts.Check(os.WriteFile(caFile, certPEM, 0o644))
	var ln net.Listener
	var addr string
	for range 20 {
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		addr = fmt.Sprintf("127.%d.%d.%d", b[0], b[1], 1+b[2]%254)
		if ln, err = net.Listen("tcp", net.JoinHostPort(addr, "443")); err == nil {
			break
		}
	}
	ts.Check(err)
	var mu sync.Mutex
	srv := &http.Server{
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			if f, err := os.OpenFile(hitsFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
				fmt.Fprintf(f, "%s %s\n", r.Host, r.URL.Path)
				f.Close()
			}
			mu.Unlock()
			switch {
			case files != nil && strings.HasPrefix(r.URL.Path, "/redirect/"):
				http.Redirect(w, r, "https://"+egressOther+"/"+strings.TrimPrefix(r.URL.Path, "/redirect/"), http.StatusFound)
			case files != nil:
				files.ServeHTTP(w, r)
			default:
				fmt.Fprintf(w, "hello from the egress test server (%s)", r.TLS.ServerName)
			}
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	ts.Defer(func() { _ = srv.Close() })
	ts.Setenv("TLSADDR", addr)
	ts.Setenv("AGENTNODE_EGRESSTEST_HOSTS", strings.Join([]string{
		egressAllowed + "=" + addr, egressOther + "=" + addr, egressPrivate + "=" + egressPrivateAddr}, ","))
	ts.Setenv("AGENTNODE_EGRESSTEST_PERMIT", addr+"/32")
}

// egressCert makes a self-signed certificate (its own CA) for the test
// names.
func egressCert() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "agentnode egress e2e"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		DNSNames:              []string{egressAllowed, egressOther, egressPrivate},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
