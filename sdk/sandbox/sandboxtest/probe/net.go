package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

const dialTimeout = 2 * time.Second

func checkOnlyLo([]string) (bool, string) {
	names := map[string]bool{}
	ifs, err := net.Interfaces()
	if err != nil {
		return false, "listing interfaces: " + err.Error()
	}
	for _, i := range ifs {
		names[i.Name] = true
	}
	// sysfs may show what netlink does not (a host /sys bind-mounted in).
	if ents, err := os.ReadDir("/sys/class/net"); err == nil {
		for _, e := range ents {
			names[e.Name()] = true
		}
	}
	var list []string
	ok := true
	for n := range names {
		list = append(list, n)
		if n != "lo" {
			ok = false
		}
	}
	sort.Strings(list)
	return ok, fmt.Sprintf("interfaces %v, want only lo", list)
}

// unreachable dials network/addr; the sandbox held when that fails.
func unreachable(network, addr string) attempt {
	c, err := net.DialTimeout(network, addr, dialTimeout)
	if err != nil {
		return att(true, fmt.Sprintf("%s %s: %v", network, addr, err))
	}
	c.Close()
	return att(false, fmt.Sprintf("connected to %s %s", network, addr))
}

// checkTCPUnreachable: HOST PORT must not accept a TCP connection.
func checkTCPUnreachable(args []string) (bool, string) {
	if len(args) != 2 {
		return false, "want arguments HOST PORT"
	}
	return all(unreachable("tcp", net.JoinHostPort(args[0], args[1])))
}

// checkAbstractUnix: the host's abstract unix socket NAME (per network
// namespace) must not accept a connection.
func checkAbstractUnix(args []string) (bool, string) {
	if len(args) != 1 {
		return false, "want argument NAME"
	}
	return all(unreachable("unix", "@"+args[0]))
}

func checkMetadata([]string) (bool, string) {
	return all(unreachable("tcp", "169.254.169.254:80"), unreachable("tcp", "[fd00:ec2::254]:80"))
}

// dnsQuery is a query for example.com/A with id 0x5a5a.
func dnsQuery() []byte {
	q := []byte{0x5a, 0x5a, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, label := range []string{"example", "com"} {
		q = append(q, byte(len(label)))
		q = append(q, label...)
	}
	q = append(q, 0)
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(q, 1), 1)
}

// checkDNS: NAMESERVER must answer neither over UDP nor over TCP.
func checkDNS(args []string) (bool, string) {
	if len(args) != 1 {
		return false, "want argument NAMESERVER"
	}
	addr := net.JoinHostPort(args[0], "53")
	udp := func() attempt {
		c, err := net.DialTimeout("udp", addr, dialTimeout)
		if err != nil {
			return att(true, "udp "+addr+": "+err.Error())
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(dialTimeout))
		if _, err := c.Write(dnsQuery()); err != nil {
			return att(true, "udp "+addr+": sending the query: "+err.Error())
		}
		buf := make([]byte, 512)
		n, err := c.Read(buf)
		if err != nil {
			return att(true, "udp "+addr+": no answer: "+err.Error())
		}
		return att(false, fmt.Sprintf("udp %s answered a DNS query (%d bytes)", addr, n))
	}
	return all(udp(), unreachable("tcp", addr))
}

// engineSockets are where container engines listen.
var engineSockets = []string{
	"/var/run/docker.sock", "/run/docker.sock",
	"/run/podman/podman.sock", "/var/run/podman/podman.sock",
	"/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock",
	"/run/crio/crio.sock", "/var/run/crio/crio.sock",
	"/run/buildkit/buildkitd.sock",
}

func checkEngineSockets([]string) (bool, string) {
	cands := append([]string(nil), engineSockets...)
	if m, _ := filepath.Glob("/run/user/*/podman/podman.sock"); len(m) > 0 {
		cands = append(cands, m...)
	}
	if m, _ := filepath.Glob("/run/user/*/docker.sock"); len(m) > 0 {
		cands = append(cands, m...)
	}
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		cands = append(cands, strings.TrimPrefix(h, "unix://"))
	}
	var res []attempt
	var present []string
	for _, p := range cands {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		present = append(present, p)
		res = append(res, unreachable("unix", p))
	}
	if len(res) == 0 {
		return true, "no engine socket present"
	}
	ok, detail := all(res...)
	return ok, fmt.Sprintf("present: %v; %s", present, detail)
}
