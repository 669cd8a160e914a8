package pluginhost

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/agentnode/agentnode/sdk/plugin"
)

// Mutual TLS between the host and its plugins, issued by the host: one
// client certificate per agentnode process, and for every launch a fresh
// server certificate and key for the plugin, handed over through a pipe
// (sdk/plugin.TLSFDEnv). Each side trusts exactly the other's certificate.
// ECDSA P-256 throughout: go-plugin's AutoMTLS does the same with P-521 on
// both sides, which cost ~30 ms of every cold run here.

// tlsName is the name in every certificate; the client verifies it.
const tlsName = "localhost"

// certLifetime bounds a certificate; a host process or plugin living longer
// keeps its established connection.
const certLifetime = 7 * 24 * time.Hour

var clientCred struct {
	once sync.Once
	cert tls.Certificate
	pem  []byte
	err  error
}

// hostClientCert returns this process's client certificate.
func hostClientCert() (tls.Certificate, []byte, error) {
	clientCred.once.Do(func() {
		certPEM, keyPEM, err := newCert(x509.ExtKeyUsageClientAuth)
		if err != nil {
			clientCred.err = err
			return
		}
		clientCred.cert, clientCred.err = tls.X509KeyPair(certPEM, keyPEM)
		clientCred.pem = certPEM
	})
	return clientCred.cert, clientCred.pem, clientCred.err
}

// launchTLS returns the host's TLS configuration for one plugin launch and
// the bundle (JSON) the plugin gets.
func launchTLS() (*tls.Config, []byte, error) {
	client, clientPEM, err := hostClientCert()
	if err != nil {
		return nil, nil, fmt.Errorf("plugin TLS client certificate: %w", err)
	}
	serverPEM, serverKey, err := newCert(x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, nil, fmt.Errorf("plugin TLS server certificate: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(serverPEM) {
		return nil, nil, fmt.Errorf("plugin TLS server certificate: not PEM")
	}
	bundle, err := json.Marshal(&plugin.TLSBundle{ServerCert: serverPEM, ServerKey: serverKey, ClientCert: clientPEM})
	if err != nil {
		return nil, nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{client},
		RootCAs:      roots,
		ServerName:   tlsName,
		MinVersion:   tls.VersionTLS13,
	}, bundle, nil
}

// newCert makes a self-signed P-256 certificate for tlsName and its key, PEM.
func newCert(usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: tlsName, Organization: []string{"agentnode plugin"}},
		DNSNames:              []string{tlsName},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(certLifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		BasicConstraintsValid: true,
		IsCA:                  true, // it is its own, only trust anchor
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
