package profile

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// egressSocket creates a real unix socket with the given mode (and, as
// root, owner) and returns its path.
func egressSocket(t *testing.T, mode os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "egress-profile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := filepath.Join(dir, "egress.sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestForRunWithoutEgress: no EgressSocket, no trace of egress: the
// optional mount is gone, argv and environment are the run's.
func TestForRunWithoutEgress(t *testing.T) {
	run := validRun()
	s := mustForRun(t, run)
	if m, err := mountAt(s, EgressSocketPath); err == nil {
		t.Errorf("egress mount present without EgressSocket: %+v", m)
	}
	if len(s.Mounts) != len(mustBase(t).Mounts)-1 {
		t.Errorf("%d mounts, want the profile's minus the egress mount", len(s.Mounts))
	}
	if !slices.Equal(s.Process.Args, run.Args) {
		t.Errorf("args %q", s.Process.Args)
	}
	for _, kv := range s.Process.Env {
		if strings.Contains(strings.ToLower(kv), "proxy") {
			t.Errorf("proxy variable without egress: %s", kv)
		}
	}
}

func TestForRunWithEgress(t *testing.T) {
	run := validRun()
	run.EgressSocket = egressSocket(t, 0o666)
	s := mustForRun(t, run)
	m, err := mountAt(s, EgressSocketPath)
	if err != nil {
		t.Fatal(err)
	}
	if m.Source != run.EgressSocket || m.Type != "bind" {
		t.Errorf("egress mount %+v", m)
	}
	for _, o := range []string{"bind", "ro", "nosuid", "nodev", "noexec"} {
		if !slices.Contains(m.Options, o) {
			t.Errorf("egress mount options %v lack %s", m.Options, o)
		}
	}
	want := append([]string{EgressForwarderPath, "-listen", "127.0.0.1:3128", "-socket", EgressSocketPath, "--"}, run.Args...)
	if !slices.Equal(s.Process.Args, want) {
		t.Errorf("args %q, want %q", s.Process.Args, want)
	}
	for _, kv := range []string{"HTTPS_PROXY=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
		"HTTP_PROXY=http://127.0.0.1:3128", "http_proxy=http://127.0.0.1:3128", "NO_PROXY=", "no_proxy="} {
		if !slices.Contains(s.Process.Env, kv) {
			t.Errorf("env lacks %s: %q", kv, s.Process.Env)
		}
	}
	for _, kv := range run.Env {
		if !slices.Contains(s.Process.Env, kv) {
			t.Errorf("the run's %s is lost", kv)
		}
	}
	// Everything else is the profile without egress.
	plain := mustForRun(t, validRun())
	if len(s.Mounts) != len(plain.Mounts)+1 {
		t.Errorf("%d mounts with egress, %d without: want exactly one more", len(s.Mounts), len(plain.Mounts))
	}
	if err := checkHardened(s); err != nil {
		t.Error(err)
	}
	// The run cannot point the proxy elsewhere or exempt hosts.
	for _, kv := range []string{"HTTPS_PROXY=http://10.0.0.1:8080", "no_proxy=*", "ALL_PROXY=socks5://x"} {
		r := run
		r.Env = []string{kv}
		if _, err := ForRun(r); err == nil || !strings.Contains(err.Error(), "Env[0]:") {
			t.Errorf("run env %s with egress: %v", kv, err)
		}
	}
}

func TestForRunEgressRejects(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "file")
	if err := os.WriteFile(regular, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	good := egressSocket(t, 0o666)
	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	private := egressSocket(t, 0o600) // owned by the test's user, not 1000
	cases := map[string]string{
		"relative":            "egress.sock",
		"missing":             filepath.Join(dir, "nothing.sock"),
		"regular file":        regular,
		"directory":           dir,
		"symlink":             link,
		"root":                "/",
		"NUL":                 good + "\x00x",
		"private (uid!=1000)": private,
	}
	if os.Getuid() == egressUID {
		delete(cases, "private (uid!=1000)")
	}
	if _, err := os.Stat("/var/run/docker.sock"); err == nil {
		cases["docker's socket"] = "/var/run/docker.sock"
		run := validRun()
		run.EgressSocket = "/var/run/docker.sock"
		if _, err := ForRun(run); err == nil || !strings.Contains(err.Error(), "engine") {
			t.Errorf("the engine socket as EgressSocket: %v, want refused as the engine's", err)
		}
	}
	for name, sock := range cases {
		t.Run(name, func(t *testing.T) {
			run := validRun()
			run.EgressSocket = sock
			s, err := ForRun(run)
			if err == nil {
				t.Fatalf("accepted %q: %+v", sock, s.Mounts)
			}
			if !strings.Contains(err.Error(), "EgressSocket:") {
				t.Errorf("error %q does not name EgressSocket", err)
			}
		})
	}
}

// TestCheckEgressSocketOwner: a socket owned by the sandbox user or its
// group is connectable without being world-writable.
func TestCheckEgressSocketOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	for _, c := range []struct {
		uid, gid int
		mode     os.FileMode
		ok       bool
	}{
		{egressUID, 0, 0o600, true},
		{0, egressGID, 0o660, true},
		{0, egressGID, 0o606, false}, // the group class applies: no write
		{egressUID, 0, 0o066, false}, // the owner class applies
		{0, 0, 0o600, false},
		{0, 0, 0o602, true},
	} {
		p := egressSocket(t, c.mode)
		if err := os.Chown(p, c.uid, c.gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, c.mode); err != nil {
			t.Fatal(err)
		}
		if err := CheckEgressSocket(p); (err == nil) != c.ok {
			t.Errorf("owner %d:%d mode %#o: %v, want ok=%v", c.uid, c.gid, c.mode, err, c.ok)
		}
	}
}

// BenchmarkForRunEgress next to BenchmarkForRun: what egress adds to
// building a run's spec (one lstat and a few appends).
func BenchmarkForRunEgress(b *testing.B) {
	dir := b.TempDir()
	p := filepath.Join(dir, "egress.sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	if err := os.Chmod(p, 0o666); err != nil {
		b.Fatal(err)
	}
	run := validRun()
	run.EgressSocket = p
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ForRun(run); err != nil {
			b.Fatal(err)
		}
	}
}
