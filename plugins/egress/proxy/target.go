package main

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/agentnode/agentnode/sdk/egress"
)

// allowedPort is the only destination port. It holds in every build,
// egresstest included.
const allowedPort = 443

// maxTargetLen bounds a CONNECT target before any parsing.
const maxTargetLen = 270

// parseTarget parses the request-target of a CONNECT request, which must be
// authority-form "host:443" with host a DNS hostname. It returns the host
// lower-cased and without one trailing dot. The error names the problem; it
// never contains more than a bounded, quoted piece of the input.
func parseTarget(target string) (host string, port int, err error) {
	if target == "" {
		return "", 0, errors.New("empty target")
	}
	if len(target) > maxTargetLen {
		return "", 0, fmt.Errorf("target longer than %d bytes", maxTargetLen)
	}
	ascii := true
	for i := 0; i < len(target); i++ {
		if c := target[i]; c <= ' ' || c == 0x7f {
			return "", 0, errors.New("control character or space in target")
		} else if c >= 0x80 {
			ascii = false
		}
	}
	if !ascii {
		return "", 0, errors.New("non-ASCII target (use the IDNA A-label)")
	}
	switch {
	case strings.HasPrefix(target, "/"), strings.Contains(target, "://"):
		return "", 0, errors.New("target must be authority-form host:443")
	case strings.HasPrefix(target, "["):
		return "", 0, errors.New("IP literal target refused")
	case strings.Contains(target, "@"):
		return "", 0, errors.New("userinfo in target refused")
	}
	i := strings.LastIndexByte(target, ':')
	if i < 0 {
		return "", 0, errors.New("target has no port (must be host:443)")
	}
	h, p := target[:i], target[i+1:]
	if strings.Contains(h, ":") {
		// An unbracketed IPv6 literal, or junk.
		if _, err := netip.ParseAddr(h); err == nil {
			return "", 0, errors.New("IP literal target refused")
		}
		return "", 0, errors.New("malformed target")
	}
	port, err = parsePort(p)
	if err != nil {
		return "", 0, err
	}
	if port != allowedPort {
		return "", port, fmt.Errorf("port %d refused (only %d)", port, allowedPort)
	}
	h = strings.ToLower(h)
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return "", port, errors.New("empty host")
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return "", port, errors.New("IP literal target refused")
	}
	if err := egress.CheckHostname(h); err != nil {
		return "", port, fmt.Errorf("bad host: %w", err)
	}
	return h, port, nil
}

// parsePort accepts a canonical decimal port 1–65535 (no sign, no leading
// zeros).
func parsePort(p string) (int, error) {
	if p == "" || len(p) > 5 || p[0] == '0' {
		return 0, errors.New("malformed port")
	}
	n := 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c < '0' || c > '9' {
			return 0, errors.New("malformed port")
		}
		n = n*10 + int(c-'0')
	}
	if n > 65535 {
		return 0, errors.New("malformed port")
	}
	return n, nil
}

// printable returns s cut to 255 bytes with every byte outside printable
// ASCII replaced by '?', for events and error messages built from client
// input.
func printable(s string) string {
	if len(s) > 255 {
		s = s[:255]
	}
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c >= 0x7f {
			b[i] = '?'
		}
	}
	return string(b)
}
