package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The sandbox user (uid/gid 1000) can connect to the socket through a bind
// mount of the socket file, as a container sees it, and cannot reach it by
// its host path (0700 directory). Run from the attacker's side: a child
// process in its own mount namespace that drops to 1000:1000.
func TestSocketReachableOnlyThroughBindMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount namespace, setuid)")
	}
	p, rec := startProxy(t, Config{})
	mnt, err := os.MkdirTemp("", "egmnt")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(mnt)
	os.Chmod(mnt, 0o755)
	target := filepath.Join(mnt, "proxy.sock")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBindMountConnect$", "-test.v")
	cmd.Env = append(os.Environ(), "EGRESS_HELPER_SOCK="+p.SocketPath(), "EGRESS_HELPER_TARGET="+target)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	for _, want := range []string{"host path: permission denied", "bind mount: HTTP/1.1 403"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("helper output lacks %q:\n%s", want, out)
		}
	}
	if ev := rec.wait(t, 1); ev[0].Host != "nope.example.net" {
		t.Errorf("event %+v", ev[0])
	}
}

// TestHelperBindMountConnect is the child of the test above.
func TestHelperBindMountConnect(t *testing.T) {
	sock, target := os.Getenv("EGRESS_HELPER_SOCK"), os.Getenv("EGRESS_HELPER_TARGET")
	if sock == "" {
		t.Skip("helper process only")
	}
	if err := syscall.Mount(sock, target, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	if err := syscall.Setgroups(nil); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setgid(1000); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setuid(1000); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("unix", sock); err == nil {
		fmt.Println("host path: connected")
	} else if strings.Contains(err.Error(), "permission denied") {
		fmt.Println("host path: permission denied")
	} else {
		fmt.Println("host path:", err)
	}
	c, err := net.Dial("unix", target)
	if err != nil {
		fmt.Println("bind mount:", err)
		return
	}
	defer c.Close()
	fmt.Fprint(c, connect("nope.example.net:443"))
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		fmt.Println("bind mount:", err)
		return
	}
	fmt.Println("bind mount:", resp.Proto, resp.StatusCode)
}
