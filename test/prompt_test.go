package test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/test/keychaintest"
)

// TestPromptOnTTY drives the real `agentnode run` with a real pseudo-terminal
// as its controlling terminal, for a curated package (real keychain key,
// real attest plugin, host placement) whose tool delete_x needs approval
// (delete → prompt). It proves from the user's side of the terminal that
// the question is asked on the TTY only, with [y/N]; that y runs the tool,
// n and EOF refuse it; that every answer is in the audit record; and that
// CI or a non-TTY stdin never shows a prompt and refuses with policy_prompt.
func TestPromptOnTTY(t *testing.T) {
	keychaintest.Require(t) // trust keygen needs it
	if _, err := os.Stat("/dev/ptmx"); err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	h := newPromptHome(t)

	t.Run("yes runs the tool and audits prompt:yes", func(t *testing.T) {
		r := h.runOnPTY(t, h.env(), "y\n", stdinPTY)
		if r.exit != 0 {
			t.Fatalf("exit %d, want 0\nstdout: %s\nstderr: %s", r.exit, r.stdout, r.stderr)
		}
		res := decodeResult(t, r.stdout)
		if res.Decision != "allow" || !res.Ran || res.OK == nil || !*res.OK || !strings.Contains(string(res.Result), `"tool":"delete_x"`) {
			t.Errorf("result %+v", res)
		}
		h.assertPromptShown(t, r)
		t.Logf("terminal: %q", r.tty)
		dec, out := h.lastRequest(t, res.RequestID)
		if dec.Decision != "allow" || !contains(dec.GuardChain, "prompt:yes") || !dec.Env.Interactive {
			t.Errorf("decision record %+v", dec)
		}
		if out == nil || out.ExitCode == nil || *out.ExitCode != 0 {
			t.Errorf("no successful outcome record: %+v", out)
		}
	})

	t.Run("yes on a terminal that is stdin, stdout and stderr", func(t *testing.T) {
		// The common interactive case: everything on the terminal. The
		// question is still asked and answered there.
		r := h.runOnPTY(t, h.env(), "yes\n", stdinStdoutStderrPTY)
		if r.exit != 0 {
			t.Fatalf("exit %d, want 0\nterminal: %q", r.exit, r.tty)
		}
		h.assertPromptShown(t, r)
		if !strings.Contains(r.tty, `"decision":"allow"`) {
			t.Errorf("the result did not reach the terminal: %q", r.tty)
		}
		dec, out := h.lastRequest(t, "")
		if !contains(dec.GuardChain, "prompt:yes") || out == nil {
			t.Errorf("decision %+v outcome %+v", dec, out)
		}
	})

	t.Run("no refuses with policy_denied and audits prompt:no", func(t *testing.T) {
		r := h.runOnPTY(t, h.env(), "n\n", stdinPTY)
		h.assertRefused(t, r, "policy_denied", "prompt:no")
		h.assertPromptShown(t, r)
	})

	t.Run("anything but yes is no", func(t *testing.T) {
		r := h.runOnPTY(t, h.env(), "sure\n", stdinPTY)
		h.assertRefused(t, r, "policy_denied", "prompt:no")
	})

	t.Run("EOF is no", func(t *testing.T) {
		// ^D on an empty line: the terminal reports end of file.
		r := h.runOnPTY(t, h.env(), "\x04", stdinPTY)
		h.assertRefused(t, r, "policy_denied", "prompt:no")
		h.assertPromptShown(t, r)
	})

	t.Run("interrupt at the prompt refuses", func(t *testing.T) {
		// ^C: the terminal sends SIGINT to agentnode's process group.
		r := h.runOnPTY(t, h.env(), "\x03", stdinPTY)
		h.assertRefused(t, r, "policy_prompt", "")
		h.assertPromptShown(t, r)
	})

	t.Run("CI never prompts", func(t *testing.T) {
		r := h.runTypeAhead(t, append(h.env(), "CI=1"), "y\n", stdinPTY)
		h.assertRefused(t, r, "policy_prompt", "")
		h.assertNoPrompt(t, r)
	})

	t.Run("GITHUB_ACTIONS never prompts", func(t *testing.T) {
		r := h.runTypeAhead(t, append(h.env(), "GITHUB_ACTIONS=true"), "y\n", stdinPTY)
		h.assertRefused(t, r, "policy_prompt", "")
		h.assertNoPrompt(t, r)
	})

	t.Run("AGENTNODE_NON_INTERACTIVE never prompts", func(t *testing.T) {
		r := h.runTypeAhead(t, append(h.env(), "AGENTNODE_NON_INTERACTIVE=true"), "y\n", stdinPTY)
		h.assertRefused(t, r, "policy_prompt", "")
		h.assertNoPrompt(t, r)
	})

	t.Run("stdin a pipe with a controlling terminal never prompts", func(t *testing.T) {
		// /dev/tty works, but stdin is not a terminal: non-interactive
		// (specs/cli.md), even though "y" is waiting on the terminal.
		r := h.runTypeAhead(t, h.env(), "y\n", stdinPipeCttyPTY)
		h.assertRefused(t, r, "policy_prompt", "")
		h.assertNoPrompt(t, r)
	})

	t.Run("stdin a pipe and no terminal never prompts", func(t *testing.T) {
		cmd := h.command(h.env())
		cmd.Stdin = strings.NewReader("y\n")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no controlling terminal
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		r := ptyRun{exit: exitCode(t, cmd.Run()), stdout: stdout.String(), stderr: stderr.String()}
		h.assertRefused(t, r, "policy_prompt", "")
		if strings.Contains(r.stdout+r.stderr, "[y/N]") {
			t.Errorf("prompt printed without a terminal: %q %q", r.stdout, r.stderr)
		}
	})

	t.Run("a tool that needs no approval is not asked about", func(t *testing.T) {
		cmd := h.command(h.env())
		cmd.Args[3] = "read_x"
		r := h.start(t, cmd, "", stdinPTY)
		if r.exit != 0 || strings.Contains(r.tty, "[y/N]") {
			t.Fatalf("exit %d, terminal %q", r.exit, r.tty)
		}
	})
}

// promptHome is a set-up AGENTNODE_HOME with one curated package.
type promptHome struct {
	dir, home string
}

func newPromptHome(t *testing.T) *promptHome {
	t.Helper()
	h := &promptHome{dir: t.TempDir()}
	h.home = filepath.Join(h.dir, "user", ".agentnode")
	pkg := filepath.Join(h.dir, "pkg")
	if err := os.MkdirAll(filepath.Join(pkg, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(pkg, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("agentnode.yaml", `manifest_version: "0.2"
package_id: prompt-tools
package_type: toolpack
name: Prompt tools
publisher: e2e
version: 1.0.0
summary: A tool that needs approval
runtime: exec
capabilities:
  tools:
    - name: delete_x
      description: Pretends to delete x (delete, by its name)
      entrypoint: bin/echo
      input_schema:
        type: object
    - name: read_x
      description: Pretends to read x
      entrypoint: bin/echo
      input_schema:
        type: object
permissions:
  network:
    level: none
  filesystem:
    level: temp
  code_execution:
    level: none
`, 0o644)
	write("bin/echo", "#!/bin/sh\nread -r req\nprintf '{\"ok\":true,\"result\":{\"request\":%s}}\\n' \"$req\"\n", 0o755)

	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(binDir, "agentnode"), args...)
		cmd.Dir, cmd.Env = h.dir, h.env()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("agentnode %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String()
	}
	run("setup")
	run("trust", "keygen", "--id", "e2e-prompt")
	att := filepath.Join(h.dir, "att.json")
	if err := os.WriteFile(att, []byte(run("trust", "attest", pkg, "--level", "curated", "--key", "e2e-prompt")), 0o600); err != nil {
		t.Fatal(err)
	}
	run("install", pkg, "--attestation", att)
	// The cases run back to back, faster than the default burst of 10 per
	// second allows.
	run("config", "set", "guard.rate_limits", `{"prompt-tools":{"per_minute":100000,"per_hour":100000,"burst":100000}}`)
	return h
}

// env is the environment of every agentnode command: this home, the built
// binaries first on PATH, the keychain's session bus, and none of the
// variables that make agentnode non-interactive.
func (h *promptHome) env() []string {
	drop := map[string]bool{"CI": true, "AGENTNODE_NON_INTERACTIVE": true, "GITHUB_ACTIONS": true, "GITLAB_CI": true,
		"CIRCLECI": true, "JENKINS_URL": true, "TRAVIS": true, "AGENTNODE_GUARD_STRICT": true, "AGENTNODE_CONFIG": true,
		"AGENTNODE_LOCKFILE": true, "AGENTNODE_HOME": true, "HOME": true, "PATH": true}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+filepath.Dir(h.home), "AGENTNODE_HOME="+h.home,
		"PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func (h *promptHome) command(env []string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(binDir, "agentnode"), "run", "prompt-tools", "delete_x", "--input", `{"x":1}`, "--json")
	cmd.Dir, cmd.Env = h.dir, env
	return cmd
}

// How the child is wired to the pseudo-terminal.
type ptyWiring int

const (
	stdinPTY             ptyWiring = iota // stdin the terminal, stdout/stderr pipes
	stdinStdoutStderrPTY                  // all three on the terminal
	stdinPipeCttyPTY                      // stdin a pipe; the terminal only as controlling terminal
)

// ptyRun is what a run left: its exit code, stdout and stderr (when they
// were pipes) and everything it wrote to the terminal.
type ptyRun struct {
	exit                int
	stdout, stderr, tty string
}

func (h *promptHome) runOnPTY(t *testing.T, env []string, answer string, w ptyWiring) ptyRun {
	t.Helper()
	return h.start(t, h.command(env), answer, w)
}

// runTypeAhead is runOnPTY with the answer typed before agentnode asks
// anything.
func (h *promptHome) runTypeAhead(t *testing.T, env []string, answer string, w ptyWiring) ptyRun {
	t.Helper()
	return h.startTyping(t, h.command(env), answer, w, true)
}

// start runs cmd in a new session whose controlling terminal is a fresh
// pseudo-terminal, and types answer on it: when the terminal shows "[y/N]"
// (after at most 10 s it types it anyway, so a missing prompt cannot hang
// the test), or at once with typeAhead (the answer then waits in the
// terminal for anyone who reads it). An empty answer types nothing.
func (h *promptHome) start(t *testing.T, cmd *exec.Cmd, answer string, w ptyWiring) ptyRun {
	return h.startTyping(t, cmd, answer, w, false)
}

func (h *promptHome) startTyping(t *testing.T, cmd *exec.Cmd, answer string, w ptyWiring, typeAhead bool) ptyRun {
	t.Helper()
	master, slave := openPTY(t)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	switch w {
	case stdinPTY:
		cmd.Stdin = slave
	case stdinStdoutStderrPTY:
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	case stdinPipeCttyPTY:
		cmd.Stdin = strings.NewReader("")
		cmd.ExtraFiles = []*os.File{slave}
		cmd.SysProcAttr.Ctty = 3
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = slave.Close() // the child holds it now

	var (
		mu      sync.Mutex
		tty     bytes.Buffer
		prompt  = make(chan struct{})
		readEnd = make(chan struct{})
	)
	go func() {
		defer close(readEnd)
		buf := make([]byte, 4096)
		seen := false
		for {
			n, err := master.Read(buf)
			mu.Lock()
			tty.Write(buf[:n])
			if !seen && strings.Contains(tty.String(), "[y/N]") {
				seen = true
				close(prompt)
			}
			mu.Unlock()
			if err != nil {
				return // EIO once every holder of the terminal is gone
			}
		}
	}()
	switch {
	case answer == "":
	case typeAhead:
		if _, err := master.Write([]byte(answer)); err != nil {
			t.Errorf("type %q: %v", answer, err)
		}
	default:
		select {
		case <-prompt:
		case <-time.After(10 * time.Second):
		}
		if _, err := master.Write([]byte(answer)); err != nil {
			t.Errorf("type %q: %v", answer, err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("agentnode did not finish within 60s")
	}
	// Drain what is left; plugin processes may hold the terminal a moment
	// longer, so do not wait for EIO forever.
	_ = master.SetReadDeadline(time.Now().Add(2 * time.Second))
	<-readEnd
	_ = master.Close()
	mu.Lock()
	defer mu.Unlock()
	return ptyRun{exit: exitCode(t, waitErr), stdout: stdout.String(), stderr: stderr.String(), tty: tty.String()}
}

// openPTY opens a new pseudo-terminal pair (/dev/ptmx, unlock, /dev/pts/N).
// The master stays non-blocking (the runtime poller), so reads honour
// deadlines and Close.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = master.Close() })
	raw, err := master.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n uint32
	var ioctlErr error
	if err := raw.Control(func(fd uintptr) {
		if ioctlErr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ioctlErr != nil {
			return
		}
		n, ioctlErr = unix.IoctlGetUint32(int(fd), unix.TIOCGPTN)
	}); err != nil || ioctlErr != nil {
		t.Fatalf("set up pty: %v %v", err, ioctlErr)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slave.Close() })
	return master, slave
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("run: %v", err)
	}
	return ee.ExitCode()
}

// runResult is the part of `agentnode run --json` these tests read.
type runResult struct {
	RequestID  string          `json:"request_id"`
	Decision   string          `json:"decision"`
	Code       string          `json:"code"`
	Reason     string          `json:"reason"`
	GuardChain []string        `json:"guard_chain"`
	Ran        bool            `json:"ran"`
	OK         *bool           `json:"ok"`
	Result     json.RawMessage `json:"result"`
}

func decodeResult(t *testing.T, s string) runResult {
	t.Helper()
	var r runResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(s)), &r); err != nil {
		t.Fatalf("run --json printed %q: %v", s, err)
	}
	return r
}

// auditRecord is the part of an audit record these tests read.
type auditRecord struct {
	Seq        int64    `json:"seq"`
	Event      string   `json:"event"`
	RequestID  string   `json:"request_id"`
	Tool       string   `json:"tool"`
	Decision   string   `json:"decision"`
	Code       string   `json:"code"`
	Reason     string   `json:"reason"`
	GuardChain []string `json:"guard_chain"`
	ExitCode   *int     `json:"exit_code"`
	Env        struct {
		CI          bool `json:"ci"`
		Interactive bool `json:"interactive"`
	} `json:"env"`
}

// lastRequest reads `agentnode audit --json` and returns the decision
// record of the newest request (or of id) and its outcome record (nil if
// the tool never ran).
func (h *promptHome) lastRequest(t *testing.T, id string) (auditRecord, *auditRecord) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "agentnode"), "audit", "-n", "4", "--json")
	cmd.Dir, cmd.Env = h.dir, h.env()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("agentnode audit: %v", err)
	}
	var recs []auditRecord // JSON lines, oldest first
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var r auditRecord
		if err := dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("audit --json: %v\n%s", err, out)
		}
		recs = append(recs, r)
	}
	if id == "" {
		for _, r := range recs {
			if r.Event == "decision" {
				id = r.RequestID
			}
		}
	}
	var decision *auditRecord
	var outcome *auditRecord
	for i := range recs {
		if recs[i].RequestID != id {
			continue
		}
		switch recs[i].Event {
		case "decision":
			decision = &recs[i]
		case "outcome":
			outcome = &recs[i]
		}
	}
	if decision == nil {
		t.Fatalf("no decision record for request %q in\n%s", id, out)
	}
	return *decision, outcome
}

// assertRefused checks a refusal: exit 3, --json code, nothing ran, and a
// decision record (no outcome) with the code and, if chain is set, that
// guard-chain entry.
func (h *promptHome) assertRefused(t *testing.T, r ptyRun, code, chain string) {
	t.Helper()
	if r.exit != 3 {
		t.Fatalf("exit %d, want 3\nstdout: %s\nstderr: %s\nterminal: %q", r.exit, r.stdout, r.stderr, r.tty)
	}
	res := decodeResult(t, r.stdout)
	if res.Decision != "deny" || res.Code != code || res.Ran || res.OK != nil {
		t.Errorf("result %+v, want a %s refusal that ran nothing", res, code)
	}
	dec, out := h.lastRequest(t, res.RequestID)
	if dec.Decision != "deny" || dec.Code != code || dec.Tool != "delete_x" {
		t.Errorf("decision record %+v, want deny %s", dec, code)
	}
	if chain != "" && !contains(dec.GuardChain, chain) {
		t.Errorf("guard chain %v lacks %s", dec.GuardChain, chain)
	}
	if chain == "" {
		for _, c := range dec.GuardChain {
			if strings.HasPrefix(c, "prompt:") {
				t.Errorf("guard chain %v records an answer nobody gave", dec.GuardChain)
			}
		}
	}
	if out != nil {
		t.Errorf("the refused tool ran: outcome %+v", out)
	}
}

// assertPromptShown: the question reached the terminal, and only the
// terminal.
func (h *promptHome) assertPromptShown(t *testing.T, r ptyRun) {
	t.Helper()
	if !strings.Contains(r.tty, "Allow prompt-tools/delete_x (delete, trust curated") || !strings.Contains(r.tty, "? [y/N] ") {
		t.Errorf("no prompt on the terminal: %q", r.tty)
	}
	if strings.Contains(r.stdout, "[y/N]") || strings.Contains(r.stderr, "[y/N]") {
		t.Errorf("prompt written to stdout or stderr: %q %q", r.stdout, r.stderr)
	}
}

// assertNoPrompt: nothing asked anywhere.
func (h *promptHome) assertNoPrompt(t *testing.T, r ptyRun) {
	t.Helper()
	for name, s := range map[string]string{"terminal": r.tty, "stdout": r.stdout, "stderr": r.stderr} {
		if strings.Contains(s, "[y/N]") || strings.Contains(s, "Allow prompt-tools") {
			t.Errorf("prompt shown on %s: %q", name, s)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
