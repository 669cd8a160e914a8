package reaper

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary plays three parts: the test, a plugin (helperEnv set)
// that arms victims, and that plugin's reaper (Serve, re-executed with
// Arg). A victim is a `sleep` process started by the test; the test reaper
// kills it and, on a final reap, leaves a file behind as its record.

const helperEnv = "REAPER_TEST_PLUGIN"

// target names a victim: its pid and start time (so a reused pid is never
// killed) and where the final reap leaves its record.
type target struct {
	Pid    int    `json:"pid"`
	Start  string `json:"start"`
	Record string `json:"record"`
}

func testReap(_ context.Context, raw json.RawMessage, final bool) error {
	var t target
	if err := json.Unmarshal(raw, &t); err != nil {
		return err
	}
	if st, err := startTime(t.Pid); err == nil && st == t.Start {
		_ = syscall.Kill(t.Pid, syscall.SIGKILL)
	}
	if final {
		return os.WriteFile(t.Record, []byte("final\n"), 0o600)
	}
	return nil
}

func TestMain(m *testing.M) {
	Serve(testReap)
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(helper(spec))
	}
	os.Exit(m.Run())
}

// helper is a plugin: it arms each victim of spec ("PID:TIMEOUT:RECORD:disarm?;..."),
// reports "armed <reaper pid>" and then waits until its stdin closes or it
// is killed.
func helper(spec string) int {
	r := New()
	for _, v := range strings.Split(spec, ";") {
		f := strings.Split(v, ":")
		pid, _ := strconv.Atoi(f[0])
		timeout, _ := time.ParseDuration(f[1])
		st, err := startTime(pid)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		run, err := r.Arm(target{Pid: pid, Start: st, Record: f[2]}, timeout)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		if len(f) > 3 && f[3] == "disarm" {
			run.Disarm()
		}
	}
	fmt.Println("armed", r.Pid())
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

func startTime(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", errors.New("short stat")
	}
	return f[19], nil
}

// victim is a process the test started and waits for.
type victim struct {
	cmd    *exec.Cmd
	record string
	done   chan struct{}
	state  *os.ProcessState
}

func newVictim(t *testing.T) *victim {
	t.Helper()
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	v := &victim{cmd: cmd, record: filepath.Join(t.TempDir(), "record"), done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		v.state = cmd.ProcessState
		close(v.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-v.done
	})
	return v
}

func (v *victim) alive() bool {
	select {
	case <-v.done:
		return false
	default:
		return true
	}
}

// waitKilled waits (60 s at most, a safety net) for the victim to die and
// checks it was SIGKILLed.
func (v *victim) waitKilled(t *testing.T) {
	t.Helper()
	select {
	case <-v.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the victim was not killed within 60 s")
	}
	ws := v.state.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("victim ended with %v, want SIGKILL", v.state)
	}
}

func (v *victim) finalReaped() bool {
	_, err := os.Stat(v.record)
	return err == nil
}

// plugin is a running helper.
type plugin struct {
	cmd       *exec.Cmd
	stdin     *os.File
	reaperPID int
	reaperFD  int // pidfd of the reaper
	done      chan struct{}
}

func startPlugin(t *testing.T, spec string) *plugin {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), helperEnv+"="+spec)
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = inR
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	p := &plugin{cmd: cmd, stdin: inW, done: make(chan struct{})}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("plugin: %v", err)
	}
	if _, err := fmt.Sscanf(line, "armed %d", &p.reaperPID); err != nil {
		t.Fatalf("plugin said %q", line)
	}
	p.reaperFD, err = unix.PidfdOpen(p.reaperPID, 0)
	if err != nil {
		t.Fatalf("pidfd of the reaper: %v", err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		inW.Close()
		<-p.done
		p.waitReaperExit(t)
		unix.Close(p.reaperFD)
	})
	return p
}

func (p *plugin) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

func (p *plugin) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// reaperExited reports whether the reaper process has exited, waiting at
// most wait.
func (p *plugin) reaperExited(wait time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(p.reaperFD), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(wait/time.Millisecond))
	for errors.Is(err, unix.EINTR) {
		n, err = unix.Poll(fds, int(wait/time.Millisecond))
	}
	return err == nil && n == 1
}

// waitReaperExit waits for the reaper to exit (60 s at most, a safety net):
// it must not outlive its plugin and its final reaps.
func (p *plugin) waitReaperExit(t *testing.T) {
	t.Helper()
	if !p.reaperExited(60 * time.Second) {
		t.Fatalf("reaper %d still runs 60 s after its plugin ended", p.reaperPID)
	}
}

// The plugin is SIGKILLed mid-run: the reaper kills and finally reaps the
// run at once (its deadline is an hour away), then exits.
func TestPluginKilled(t *testing.T) {
	v := newVictim(t)
	p := startPlugin(t, fmt.Sprintf("%d:1h:%s", v.cmd.Process.Pid, v.record))
	if !v.alive() {
		t.Fatal("the victim died before the plugin did")
	}
	p.kill(t)
	v.waitKilled(t)
	p.waitReaperExit(t)
	if !v.finalReaped() {
		t.Fatal("the reaper killed the run but did not reap it finally (remove and prove)")
	}
}

// A run the plugin disarmed (it removed the container itself) is left
// alone when the plugin goes, and the reaper exits with its plugin.
func TestDisarmedRunUntouched(t *testing.T) {
	v := newVictim(t)
	p := startPlugin(t, fmt.Sprintf("%d:1h:%s:disarm", v.cmd.Process.Pid, v.record))
	p.kill(t)
	p.waitReaperExit(t)
	if !v.alive() || v.finalReaped() {
		t.Fatal("the reaper reaped a disarmed run")
	}
}

// A plugin that lives but hangs past a run's deadline: the reaper kills the
// run (not finally: the plugin may still remove it), and reaps it finally
// once the plugin is gone.
func TestDeadlineWhilePluginHangs(t *testing.T) {
	v := newVictim(t)
	p := startPlugin(t, fmt.Sprintf("%d:100ms:%s", v.cmd.Process.Pid, v.record))
	v.waitKilled(t)
	if !p.alive() {
		t.Fatal("the plugin died; the deadline path was not what killed the run")
	}
	if v.finalReaped() {
		t.Fatal("a final reap while the plugin lives")
	}
	if p.reaperExited(0) {
		t.Fatal("the reaper exited while its plugin lives")
	}
	p.kill(t)
	p.waitReaperExit(t)
	if !v.finalReaped() {
		t.Fatal("no final reap after the plugin died")
	}
}

// Two plugins (two agentnode instances): killing one reaps its run only.
func TestOtherPluginsRunUntouched(t *testing.T) {
	va, vb := newVictim(t), newVictim(t)
	pa := startPlugin(t, fmt.Sprintf("%d:1h:%s", va.cmd.Process.Pid, va.record))
	pb := startPlugin(t, fmt.Sprintf("%d:1h:%s", vb.cmd.Process.Pid, vb.record))
	pa.kill(t)
	va.waitKilled(t)
	pa.waitReaperExit(t)
	if !vb.alive() || vb.finalReaped() {
		t.Fatal("another plugin's run was reaped")
	}
	if pb.reaperExited(0) {
		t.Fatal("the other plugin's reaper exited")
	}
	// Its own plugin ending normally (stdin closed, exit 0) reaps it too:
	// the run was never disarmed.
	pb.stdin.Close()
	<-pb.done
	vb.waitKilled(t)
	pb.waitReaperExit(t)
}

// A reaper that died (killed by hand) is replaced at the next Arm.
func TestArmRestartsDeadReaper(t *testing.T) {
	r := New()
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	first := r.Pid()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-r.exited
	v := newVictim(t)
	st, err := startTime(v.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	run, err := r.Arm(target{Pid: v.cmd.Process.Pid, Start: st, Record: v.record}, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Pid() == first {
		t.Fatal("no new reaper")
	}
	v.waitKilled(t) // the new reaper enforces the deadline
	run.Disarm()
	run.Disarm() // twice is fine
	r.mu.Lock()
	_ = r.w.Close()
	r.mu.Unlock()
	<-r.exited
	if v.finalReaped() {
		t.Fatal("a disarmed run was reaped finally")
	}
}

func TestArmRefusesLargeTarget(t *testing.T) {
	r := New()
	if _, err := r.Arm(strings.Repeat("x", maxMessage), time.Second); err == nil {
		t.Fatal("a target over PIPE_BUF was armed")
	}
	if _, err := r.Arm("x", -time.Second); err == nil {
		t.Fatal("a negative timeout was armed")
	}
}
