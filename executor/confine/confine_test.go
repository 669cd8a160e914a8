package confine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestAssess(t *testing.T) {
	for _, c := range []struct {
		mode     string
		abi      int
		landlock Landlock
		note     string
		err      string
	}{
		{ModeRequired, MinABI, LandlockRequired, "", ""},
		{ModeRequired, 11, LandlockRequired, "", ""},
		{ModeBestEffort, MinABI, LandlockRequired, "", ""},
		{ModeRequired, MinABI - 1, "", "", "Landlock ABI is 5, confinement needs 6"},
		{ModeRequired, 1, "", "", "Landlock ABI is 1"},
		{ModeRequired, 0, "", "", "no Landlock"},
		{ModeBestEffort, 3, LandlockBestEffort, "partly confined: landlock ABI 3 < 6", ""},
		{ModeBestEffort, 0, LandlockOff, "unconfined: landlock unavailable", ""},
		{"", 7, "", "", "unknown host_confinement mode"},
		{"best-effort", 0, "", "", "unknown host_confinement mode"},
	} {
		a, err := Assess(c.mode, c.abi)
		if c.err != "" {
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Assess(%q, %d) = %v, want error %q", c.mode, c.abi, err, c.err)
			}
			continue
		}
		if err != nil || a.Landlock != c.landlock || a.Note != c.note {
			t.Errorf("Assess(%q, %d) = %+v, %v; want %s %q", c.mode, c.abi, a, err, c.landlock, c.note)
		}
	}
}

// TestReadSetExcludesSecrets: whatever the machine, no rule grants the
// user's home, another user's home, /tmp, /run, /var or all of /etc or
// /proc; only the package and work directories are added per run.
func TestReadSetExcludesSecrets(t *testing.T) {
	home, _ := os.UserHomeDir()
	forbidden := []string{"/", "/root", "/home", "/tmp", "/run", "/var", "/etc", "/proc", "/sys", "/dev",
		"/etc/ssh", "/etc/ssl/private", "/etc/shadow", "/etc/sudoers", "/proc/self", os.TempDir()}
	if home != "" {
		forbidden = append(forbidden, home, filepath.Join(home, ".ssh"))
	}
	p := &Policy{PackageDir: "/opt/pack", WorkDir: "/tmp/agentnode-tool-1"}
	for _, r := range p.rules()[2:] {
		for _, f := range forbidden {
			if r.path == f || strings.HasPrefix(f+"/", strings.TrimSuffix(r.path, "/")+"/") {
				t.Errorf("rule %s (access %#x) covers %s", r.path, r.access, f)
			}
		}
		if r.access&^(fsRead|fsExec|fsDevice) != 0 {
			t.Errorf("system rule %s grants %#x", r.path, r.access)
		}
		if r.access&unix.LANDLOCK_ACCESS_FS_WRITE_FILE != 0 && !strings.HasPrefix(r.path, "/dev/") {
			t.Errorf("system rule %s grants writing", r.path)
		}
	}
	rs := p.rules()
	if rs[0].path != p.WorkDir || rs[0].access&fsExec != 0 || rs[1].path != p.PackageDir ||
		rs[1].access&unix.LANDLOCK_ACCESS_FS_WRITE_FILE != 0 {
		t.Errorf("per-run rules: %+v %+v", rs[0], rs[1])
	}
}

func TestHandledRights(t *testing.T) {
	if handledFS(1) != 0x1fff || handledFS(3)&unix.LANDLOCK_ACCESS_FS_TRUNCATE == 0 ||
		handledFS(2)&unix.LANDLOCK_ACCESS_FS_TRUNCATE != 0 || handledFS(9)&unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX == 0 {
		t.Errorf("handledFS: %#x %#x %#x", handledFS(1), handledFS(2), handledFS(3))
	}
	if handledNet(3, false) != 0 || handledNet(4, false) != 3 || handledNet(10, false) != 15 || handledNet(10, true) != 0 {
		t.Error("handledNet")
	}
	if scoped(5) != 0 || scoped(6) != 3 {
		t.Error("scoped")
	}
}

// TestFilterCompiles: every denied syscall is known to libseccomp and both
// programs compile (and are cached).
func TestFilterCompiles(t *testing.T) {
	for _, network := range []bool{false, true} {
		prog, err := filterProgram(network)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := filterProgram(network)
		if len(prog) < len(DeniedSyscalls) || &again[0] != &prog[0] {
			t.Fatalf("network %v: %d instructions, cached %v", network, len(prog), &again[0] == &prog[0])
		}
		t.Logf("network %v: %d BPF instructions", network, len(prog))
	}
}

func requireLandlock(t *testing.T) {
	t.Helper()
	if LandlockABI() < MinABI {
		// confinetest.Require, which this package cannot import.
		if os.Getenv("AGENTNODE_REQUIRE_LANDLOCK") == "1" {
			t.Fatalf("AGENTNODE_REQUIRE_LANDLOCK=1 but the kernel's Landlock ABI is %d < %d", LandlockABI(), MinABI)
		}
		t.Skipf("Landlock ABI %d < %d", LandlockABI(), MinABI)
	}
}

// TestStartConfinesChild runs a real child through Start: the kernel
// reports it filtered and without capabilities, and it cannot read a file
// outside its rules while it can write its work dir.
func TestStartConfinesChild(t *testing.T) {
	requireLandlock(t)
	pack, work := t.TempDir(), t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	var out strings.Builder
	var stdin io.WriteCloser
	release, err := Start(&Policy{PackageDir: pack, WorkDir: work, Landlock: LandlockRequired}, func() (err error) {
		cmd = exec.Command("/bin/sh", "-c", `read x; cat "$1" 2>&1; echo x > "$2/ok" && echo wrote`, "sh", secret, work)
		cmd.Stdout, cmd.Stderr = &out, &out
		if stdin, err = cmd.StdinPipe(); err != nil {
			return err
		}
		return cmd.Start()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	wants := []string{"NoNewPrivs:\t1", "Seccomp:\t2", "CapEff:\t0000000000000000",
		"CapPrm:\t0000000000000000", "CapAmb:\t0000000000000000"}
	if os.Geteuid() == 0 {
		// root would regain its bounding set at exec, so that is emptied
		wants = append(wants, "CapBnd:\t0000000000000000")
	}
	for _, want := range wants {
		if !strings.Contains(string(status), want+"\n") {
			t.Errorf("child status lacks %q", want)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	got := out.String()
	if strings.Contains(got, "s3cret") || !strings.Contains(got, "Permission denied") || !strings.Contains(got, "wrote") {
		t.Fatalf("child output:\n%s", got)
	}
}

// TestStartErrors: a confinement that cannot be made fails before start is
// called; start's own error comes back unchanged.
func TestStartErrors(t *testing.T) {
	requireLandlock(t)
	called := false
	start := func() error { called = true; return nil }

	_, err := Start(&Policy{PackageDir: "/nonexistent-pack", WorkDir: t.TempDir(), Landlock: LandlockRequired}, start)
	if !errors.Is(err, ErrConfine) || called {
		t.Fatalf("missing package dir: %v (start called: %v)", err, called)
	}

	saved := kernelABI
	kernelABI = func() int { return MinABI - 1 }
	_, err = Start(&Policy{PackageDir: t.TempDir(), WorkDir: t.TempDir(), Landlock: LandlockRequired}, start)
	kernelABI = saved
	if !errors.Is(err, ErrConfine) || called || !strings.Contains(err.Error(), "need 6") {
		t.Fatalf("old kernel, required: %v (start called: %v)", err, called)
	}

	boom := errors.New("boom")
	_, err = Start(&Policy{PackageDir: t.TempDir(), WorkDir: t.TempDir(), Landlock: LandlockRequired},
		func() error { return boom })
	if err != boom {
		t.Fatalf("start error: %v", err)
	}
}
