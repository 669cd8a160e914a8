package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// proxyVars are the variables a sealed-egress run sets to the proxy URL.
var proxyVars = []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"}

// checkEgressAbsent (a run without EgressSocket): no proxy variable, nothing
// listening on the forwarder's address, and no socket at SOCKETPATH.
// Args: LISTENADDR SOCKETPATH.
func checkEgressAbsent(args []string) (bool, string) {
	if len(args) != 2 {
		return false, "want arguments LISTENADDR SOCKETPATH"
	}
	var as []attempt
	for _, k := range append(proxyVars, "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy") {
		if v, ok := os.LookupEnv(k); ok {
			as = append(as, att(false, fmt.Sprintf("%s=%q is set without egress", k, v)))
		}
	}
	as = append(as, unreachable("tcp", args[0]))
	var st unix.Stat_t
	switch err := unix.Lstat(args[1], &st); {
	case err != nil:
		as = append(as, att(true, args[1]+": "+errText(err)))
	case st.Mode&unix.S_IFMT == unix.S_IFSOCK:
		as = append(as, att(false, args[1]+" is a socket without egress"))
	default:
		if _, mounted, _ := mountAt(args[1]); mounted {
			as = append(as, att(false, args[1]+" is a mount point without egress"))
		} else {
			as = append(as, att(true, args[1]+" is the image's plain mount point"))
		}
	}
	return all(as...)
}

// checkEgressEnv: every proxy variable is URL, NO_PROXY and no_proxy are
// set and empty. Args: URL.
func checkEgressEnv(args []string) (bool, string) {
	if len(args) != 1 {
		return false, "want argument URL"
	}
	var as []attempt
	for _, k := range proxyVars {
		v, ok := os.LookupEnv(k)
		as = append(as, att(ok && v == args[0], fmt.Sprintf("%s=%q", k, v)))
	}
	for _, k := range []string{"NO_PROXY", "no_proxy"} {
		v, ok := os.LookupEnv(k)
		as = append(as, att(ok && v == "", fmt.Sprintf("%s=%q (set %v)", k, v, ok)))
	}
	return all(as...)
}

// checkEgressReachesHost connects to $HTTPS_PROXY, sends a CONNECT for
// HOST:443 and a payload, and expects the host's answer: a 200 with the
// suite's nonce header, then the payload echoed. Args: HOST.
func checkEgressReachesHost(args []string) (bool, string) {
	if len(args) != 1 {
		return false, "want argument HOST"
	}
	u, err := url.Parse(os.Getenv("HTTPS_PROXY"))
	if err != nil || u.Host == "" {
		return false, fmt.Sprintf("HTTPS_PROXY %q is not a proxy URL: %v", os.Getenv("HTTPS_PROXY"), err)
	}
	c, err := net.DialTimeout("tcp", u.Host, dialTimeout)
	if err != nil {
		return false, "connecting to the proxy " + u.Host + ": " + err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	target := net.JoinHostPort(args[0], "443")
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		return false, "sending CONNECT: " + err.Error()
	}
	r := bufio.NewReader(c)
	status, err := r.ReadString('\n')
	if err != nil {
		return false, "reading the proxy's answer: " + err.Error()
	}
	var headers []string
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return false, "reading the proxy's headers: " + err.Error()
		}
		if l = strings.TrimRight(l, "\r\n"); l == "" {
			break
		}
		headers = append(headers, l)
	}
	if !strings.HasPrefix(status, "HTTP/1.1 200") {
		return false, fmt.Sprintf("proxy answered %q", strings.TrimSpace(status))
	}
	payload := "sandboxtest-egress-payload-" + strconv.Itoa(os.Getpid())
	if _, err := io.WriteString(c, payload); err != nil {
		return false, "sending through the tunnel: " + err.Error()
	}
	echo := make([]byte, len(payload))
	if _, err := io.ReadFull(r, echo); err != nil || string(echo) != payload {
		return false, fmt.Sprintf("tunnel echoed %q (%v), want %q", echo, err, payload)
	}
	return true, fmt.Sprintf("via %s: %s; headers %s; %d bytes echoed", u.Host, strings.TrimSpace(status), strings.Join(headers, ", "), len(payload))
}

// checkEgressSocketMount: PATH is a unix socket, mounted read-only, in a
// directory nothing can be created in, and nothing can be created below it.
// Args: PATH.
func checkEgressSocketMount(args []string) (bool, string) {
	if len(args) != 1 {
		return false, "want argument PATH"
	}
	p := args[0]
	var as []attempt
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return false, p + ": " + errText(err)
	}
	as = append(as, att(st.Mode&unix.S_IFMT == unix.S_IFSOCK, fmt.Sprintf("%s has mode %#o", p, st.Mode)))
	as = append(as, roMount(p))
	as = append(as, cannotCreate(filepath.Dir(p)))
	f, err := os.OpenFile(filepath.Join(p, "x"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err == nil {
		f.Close()
		as = append(as, att(false, "created a file below "+p))
	} else {
		as = append(as, att(true, "creating below "+p+": "+errText(err)))
	}
	return all(as...)
}

// checkEgressPid1: pid 1 is the forwarder (argv[0] FORWARDER), this
// process's parent, and as confined as this process: uid/gid 1000, no
// capabilities, no_new_privs, a seccomp filter. Args: FORWARDER.
func checkEgressPid1(args []string) (bool, string) {
	if len(args) != 1 {
		return false, "want argument FORWARDER"
	}
	var as []attempt
	cmdline, err := os.ReadFile("/proc/1/cmdline")
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	as = append(as, att(err == nil && string(argv0) == args[0], fmt.Sprintf("pid 1 is %q (%v)", argv0, err)))
	as = append(as, att(os.Getppid() == 1, fmt.Sprintf("parent pid %d", os.Getppid())))
	status, err := os.ReadFile("/proc/1/status")
	if err != nil {
		return false, "reading /proc/1/status: " + err.Error()
	}
	want := map[string]string{
		"Uid": "1000 1000 1000 1000", "Gid": "1000 1000 1000 1000",
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
		"NoNewPrivs": "1", "Seccomp": "2",
	}
	got := map[string]string{}
	for _, l := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if ok {
			got[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, shown := got[k]; !shown && underGVisor() && (k == "CapAmb" || k == "NoNewPrivs") {
			// gVisor's kernel has no ambient set and always sets
			// no_new_privs; its status shows neither.
			as = append(as, att(true, fmt.Sprintf("pid 1 %s not shown (gVisor)", k)))
			continue
		}
		as = append(as, att(got[k] == want[k], fmt.Sprintf("pid 1 %s %q", k, got[k])))
	}
	return all(as...)
}

// checkEgressNoOtherWay: with the forwarder running, the host's TCP
// services, its abstract unix sockets, the metadata service and a public
// DNS server are still out of reach. Args: ABSTRACTNAME TCPADDR...
func checkEgressNoOtherWay(args []string) (bool, string) {
	if len(args) < 1 {
		return false, "want arguments ABSTRACTNAME TCPADDR..."
	}
	as := []attempt{unreachable("unix", "@"+args[0]), unreachable("tcp", "169.254.169.254:80"), unreachable("tcp", "8.8.8.8:53")}
	for _, a := range args[1:] {
		as = append(as, unreachable("tcp", a))
	}
	ok, detail := checkDNS([]string{"8.8.8.8"})
	as = append(as, att(ok, detail))
	return all(as...)
}

// printMounts is the mounts helper: the mount points of this mount
// namespace, sorted, as one JSON array.
func printMounts() error {
	ms, err := mounts()
	if err != nil {
		return err
	}
	points := make([]string, 0, len(ms))
	for _, m := range ms {
		points = append(points, m.point)
	}
	sort.Strings(points)
	b, err := json.Marshal(points)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(append(b, '\n'))
	return err
}
