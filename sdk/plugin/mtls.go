package plugin

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// TLSFDEnv names the inherited file descriptor from which a plugin reads its
// mutual-TLS credentials (a TLSBundle as JSON), written by the host into a
// pipe just before the plugin starts. The private key never travels in the
// environment or on a command line.
//
// This replaces go-plugin's AutoMTLS, which generates P-521 certificates on
// both sides for every launch and cost ~30 ms per cold run on a 2-core
// machine; the host issues P-256 certificates instead (kernel/pluginhost).
// A plugin started without TLSFDEnv falls back to go-plugin's AutoMTLS when
// the host asks for it (PLUGIN_CLIENT_CERT), so hosts using plain go-plugin
// still work.
const TLSFDEnv = "AGENTNODE_PLUGIN_TLS_FD"

// maxTLSBundle bounds what a plugin reads from the credentials pipe.
const maxTLSBundle = 64 << 10

// TLSBundle is what the host hands a plugin: the plugin's server certificate
// and key, and the one client certificate it must require. All PEM.
type TLSBundle struct {
	ServerCert []byte `json:"server_cert"`
	ServerKey  []byte `json:"server_key"`
	ClientCert []byte `json:"client_cert"`
}

// ServerTLSConfig is the plugin's side of the bundle: serve with the
// server certificate, accept only the host's client certificate, TLS 1.3.
func (b *TLSBundle) ServerTLSConfig() (*tls.Config, error) {
	cert, err := tls.X509KeyPair(b.ServerCert, b.ServerKey)
	if err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	clients := x509.NewCertPool()
	if !clients.AppendCertsFromPEM(b.ClientCert) {
		return nil, errors.New("client certificate: no PEM certificate")
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clients,
		MinVersion:   tls.VersionTLS13,
	}, nil
}

// serverTLS is Serve's go-plugin TLSProvider: nil (go-plugin's own AutoMTLS
// or, without it, no TLS) when the host passed no credentials; otherwise the
// bundle from the inherited descriptor, or an error, which stops the plugin.
func serverTLS() (*tls.Config, error) {
	v := os.Getenv(TLSFDEnv)
	if v == "" {
		return nil, nil
	}
	os.Unsetenv(TLSFDEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("%s=%q is not an inherited descriptor", TLSFDEnv, v)
	}
	f := os.NewFile(uintptr(fd), "agentnode-plugin-tls")
	if f == nil {
		return nil, fmt.Errorf("%s=%d: no such descriptor", TLSFDEnv, fd)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTLSBundle+1))
	if err != nil {
		return nil, fmt.Errorf("read TLS credentials: %w", err)
	}
	if len(data) > maxTLSBundle {
		return nil, errors.New("TLS credentials too large")
	}
	var b TLSBundle
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("TLS credentials: %w", err)
	}
	return b.ServerTLSConfig()
}
