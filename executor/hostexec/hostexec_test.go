package hostexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentnode/agentnode/executor/toolio"
	"github.com/agentnode/agentnode/kernel/reason"
)

// The tests run real /bin/sh tools and are deliberately not parallel: a
// script written while another goroutine forks can fail to exec (ETXTBSY).

// newPack returns a package directory holding the shell script body as
// tool.sh.
func newPack(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	writeTool(t, filepath.Join(dir, "tool.sh"), body)
	return dir
}

func writeTool(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
}

func request(pack string, args ...string) *Request {
	return &Request{
		PackageDir: pack,
		Entrypoint: "tool.sh",
		Args:       args,
		Env:        AllowedEnv(os.Environ()),
		Timeout:    20 * time.Second,
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// within is a safety net for a process that never goes, not a bound on how
// fast a killed process is reaped.
func waitGone(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d is still alive %s later", pid, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readPid reads a pid a tool wrote to path and makes sure the process does
// not outlive the test even if the test fails.
func readPid(t *testing.T, path string) int {
	t.Helper()
	var b []byte
	deadline := time.Now().Add(30 * time.Second) // a safety net
	for {
		b, _ = os.ReadFile(path)
		if len(bytes.TrimSpace(b)) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || pid <= 1 {
		t.Fatalf("pid file %s: %q", path, b)
	}
	t.Cleanup(func() {
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

func TestEchoRoundTrip(t *testing.T) {
	pack := newPack(t, `IFS= read -r line
printf '{"ok":true,"result":%s}\n' "$line"
`)
	input := json.RawMessage(`{"msg":"héllo \"world\"","n":[1,2.5,null]}`)
	in, err := toolio.EncodeRequest("echo", input)
	if err != nil {
		t.Fatal(err)
	}
	req := request(pack)
	req.Stdin = in
	res, err := Run(context.Background(), req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.ExitCode != 0 || res.TimedOut || res.StdoutTruncated || res.Duration <= 0 {
		t.Fatalf("result %+v", res)
	}
	resp, err := toolio.DecodeResponse(res.Stdout)
	if err != nil {
		t.Fatalf("decode %q: %v", res.Stdout, err)
	}
	var got struct {
		Tool  string
		Input map[string]any
	}
	if err := json.Unmarshal(resp.Result, &got); err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	_ = json.Unmarshal(input, &want)
	if !resp.OK || got.Tool != "echo" || fmt.Sprint(got.Input) != fmt.Sprint(want) {
		t.Fatalf("tool saw %+v, want tool echo input %v", got, want)
	}
}

func TestArgsAndCwd(t *testing.T) {
	pack := newPack(t, `printf '%s|' "$@"; echo; pwd -P; stat -c %a .; echo "$0"`)
	res, err := Run(context.Background(), request(pack, "--flag", "a b", ""))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	if len(lines) != 4 {
		t.Fatalf("output %q", res.Stdout)
	}
	if lines[0] != "--flag|a b||" {
		t.Errorf("args = %q", lines[0])
	}
	realPack, _ := filepath.EvalSymlinks(pack)
	if lines[1] == realPack || !filepath.IsAbs(lines[1]) || strings.HasPrefix(lines[1], realPack) {
		t.Errorf("cwd = %q, want a fresh dir outside the package %s", lines[1], realPack)
	}
	if lines[2] != "700" {
		t.Errorf("work dir mode = %s, want 700", lines[2])
	}
	if lines[3] != filepath.Join(realPack, "tool.sh") {
		t.Errorf("argv[0] = %q", lines[3])
	}
}

func TestExitCode(t *testing.T) {
	pack := newPack(t, `echo '{"ok":false,"error":"bad input"}'; echo oops >&2; exit 7`)
	res, err := Run(context.Background(), request(pack))
	if err != nil {
		t.Fatalf("a failing tool is not a Run error: %v", err)
	}
	if res.ExitCode != 7 || string(res.Stderr) != "oops\n" || res.StderrTruncated {
		t.Fatalf("result %+v", res)
	}
	if r, err := toolio.DecodeResponse(res.Stdout); err != nil || r.OK || r.Error != "bad input" {
		t.Fatalf("response %+v, %v", r, err)
	}

	pack = newPack(t, `kill -TERM $$`)
	res, err = Run(context.Background(), request(pack))
	if err != nil || res.ExitCode != 128+int(syscall.SIGTERM) {
		t.Fatalf("signalled tool: %+v, %v", res, err)
	}
}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile, cwdFile := filepath.Join(dir, "child.pid"), filepath.Join(dir, "cwd")
	pack := newPack(t, `pwd > "$2"
sleep 300 &
echo $! > "$1"
wait
`)
	req := request(pack, pidFile, cwdFile)
	req.Timeout = 500 * time.Millisecond
	start := time.Now()
	res, err := Run(context.Background(), req)
	elapsed := time.Since(start)
	if !errors.Is(err, reason.ErrTimeout) || reason.CodeOf(err) != reason.Timeout {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v does not wrap context.DeadlineExceeded", err)
	}
	if res == nil || !res.TimedOut || res.ExitCode != 128+int(syscall.SIGKILL) {
		t.Fatalf("result %+v", res)
	}
	// The timeout fired, not something earlier. (Waiting for the orphaned
	// sleep instead of killing the group would hang Run for 300 s, and the
	// child is proven gone below.)
	if elapsed < req.Timeout {
		t.Errorf("Run returned after %s, before its %s timeout", elapsed, req.Timeout)
	}
	child := readPid(t, pidFile)
	waitGone(t, child, 30*time.Second)
	cwd, _ := os.ReadFile(cwdFile)
	if len(bytes.TrimSpace(cwd)) == 0 {
		t.Fatal("tool did not report its work dir")
	}
	if _, err := os.Stat(string(bytes.TrimSpace(cwd))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("work dir %s survived the timeout: %v", cwd, err)
	}
}

func TestContextCancelKills(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	pack := newPack(t, `sleep 300 &
echo $! > "$1"
wait
`)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			if b, _ := os.ReadFile(pidFile); len(b) > 0 {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	res, err := Run(ctx, request(pack, pidFile))
	if !errors.Is(err, reason.ErrTimeout) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want timeout wrapping context.Canceled", err)
	}
	if res == nil || !res.TimedOut {
		t.Fatalf("result %+v", res)
	}
	waitGone(t, readPid(t, pidFile), 30*time.Second)

	// A context that is already done starts nothing.
	marker := filepath.Join(dir, "ran")
	pack = newPack(t, `touch "$1"`)
	if _, err := Run(ctx, request(pack, marker)); !errors.Is(err, reason.ErrTimeout) {
		t.Fatalf("done ctx: err = %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("tool ran with a done context")
	}
}

func TestLeftoverChildKilledAfterExit(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	// The background sleep also holds stdout open: without the group kill
	// the host would wait for it.
	pack := newPack(t, `sleep 300 &
echo $! > "$1"
echo '{"ok":true,"result":1}'
`)
	// Had Run waited for the sleep to close stdout it would have ended by
	// its timeout: a nil error with exit 0 is the proof it did not.
	res, err := Run(context.Background(), request(pack, pidFile))
	if err != nil || res.ExitCode != 0 || res.TimedOut {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	if string(res.Stdout) != "{\"ok\":true,\"result\":1}\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
	waitGone(t, readPid(t, pidFile), 30*time.Second)
}

func TestEscapedProcessDoesNotHangHost(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	pidFile := filepath.Join(t.TempDir(), "escaped.pid")
	// setsid leaves the process group, which a group kill cannot reach (a
	// documented limit of host placement). It holds stdout open; Run must
	// still return promptly with the tool's output.
	pack := newPack(t, `setsid sh -c 'echo $$ > "$1"; exec sleep 300' sh "$1" &
while [ ! -s "$1" ]; do sleep 0.01; done
echo '{"ok":true,"result":1}'
`)
	// Hanging on the escaped process's stdout would end Run by its
	// timeout: a nil error, not timed out, is the proof it did not.
	res, err := Run(context.Background(), request(pack, pidFile))
	escaped := readPid(t, pidFile)
	if err != nil || res.ExitCode != 0 || res.TimedOut || string(res.Stdout) != "{\"ok\":true,\"result\":1}\n" {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	t.Logf("escaped process %d alive after the run: %v (killed by cleanup)", escaped, alive(escaped))
}

func TestStdoutFloodCut(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		max        int
	}{
		{"default limit", "exec yes", 0},
		{"small limit", "exec yes", 100 << 10},
		{"flood from a child", "yes &\nsleep 300", 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pack := newPack(t, tc.body)
			req := request(pack)
			req.MaxStdout = tc.max
			want := tc.max
			if want == 0 {
				want = toolio.MaxOutput
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			res, err := Run(context.Background(), req)
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, toolio.ErrOutputTooLarge) {
				t.Fatalf("err = %v", err)
			}
			if res == nil {
				t.Fatal("no result")
			}
			if !res.StdoutTruncated || len(res.Stdout) != want || res.TimedOut {
				t.Fatalf("truncated=%v len=%d want %d", res.StdoutTruncated, len(res.Stdout), want)
			}
			if !bytes.HasPrefix(res.Stdout, []byte("y\ny\n")) {
				t.Errorf("stdout starts %q", res.Stdout[:8])
			}
			// (An uncut flood runs into the timeout: TimedOut is false above.)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("limit %d: cut after %s, %d bytes allocated", want, elapsed, alloc)
			if alloc > uint64(3*want+(1<<20)) {
				t.Errorf("allocated %d bytes for a %d byte limit", alloc, want)
			}
		})
	}
}

func TestStdoutLimitBoundary(t *testing.T) {
	pack := newPack(t, `head -c 1000 /dev/zero`)
	req := request(pack)
	req.MaxStdout = 1000
	res, err := Run(context.Background(), req)
	if err != nil || res.StdoutTruncated || len(res.Stdout) != 1000 {
		t.Fatalf("exactly the limit: %v, %+v", err, res)
	}
	req.MaxStdout = 999
	res, err = Run(context.Background(), req)
	if !errors.Is(err, toolio.ErrOutputTooLarge) || !res.StdoutTruncated || len(res.Stdout) != 999 {
		t.Fatalf("one over the limit: %v, %+v", err, res)
	}
}

func TestStderrFloodBounded(t *testing.T) {
	pack := newPack(t, `printf BEGIN >&2
head -c 5000000 /dev/zero | tr '\0' x >&2
printf END >&2
echo '{"ok":true,"result":1}'
`)
	res, err := Run(context.Background(), request(pack))
	if err != nil || res.ExitCode != 0 || res.TimedOut {
		t.Fatalf("Run: %v, %+v", err, res)
	}
	if len(res.Stderr) != toolio.MaxStderr || !res.StderrTruncated {
		t.Fatalf("stderr len %d truncated %v", len(res.Stderr), res.StderrTruncated)
	}
	if !bytes.HasPrefix(res.Stderr, []byte("BEGINxxx")) || !bytes.HasSuffix(res.Stderr, []byte("xxxEND")) {
		t.Errorf("stderr head %q tail %q", res.Stderr[:8], res.Stderr[len(res.Stderr)-8:])
	}
	if _, err := toolio.DecodeResponse(res.Stdout); err != nil {
		t.Errorf("stdout after a stderr flood: %v", err)
	}

	req := request(pack)
	req.MaxStderr = 7
	res, err = Run(context.Background(), req)
	if err != nil || string(res.Stderr) != "BEGxEND" || !res.StderrTruncated {
		t.Fatalf("MaxStderr 7: %+v, %v", res, err)
	}
}

func TestHeadTail(t *testing.T) {
	var stream []byte
	for i := 0; i < 5000; i++ {
		stream = append(stream, byte('a'+i%26))
	}
	for _, max := range []int{1, 2, 7, 64, 100, 4999, 5000, 5001} {
		for _, chunk := range []int{1, 3, 50, 64, 999, 5000} {
			h := newHeadTail(max)
			for p := stream; len(p) > 0; {
				n := min(chunk, len(p))
				h.write(p[:n])
				p = p[n:]
			}
			got, trunc := h.bytes()
			want := stream
			if len(stream) > max {
				want = append(append([]byte{}, stream[:max/2]...), stream[len(stream)-(max-max/2):]...)
			}
			if !bytes.Equal(got, want) || trunc != (len(stream) > max) {
				t.Fatalf("max %d chunk %d: got %d bytes trunc=%v, want %d bytes", max, chunk, len(got), trunc, len(want))
			}
			if cap(h.tail) > 4*h.tailMax+64 {
				t.Fatalf("max %d chunk %d: tail buffer grew to %d", max, chunk, cap(h.tail))
			}
		}
	}
}

func TestToolIgnoringStdin(t *testing.T) {
	pack := newPack(t, `echo '{"ok":true,"result":"ignored"}'`)
	req := request(pack)
	req.Stdin = bytes.Repeat([]byte("z"), 8<<20) // far beyond any pipe buffer
	// Blocking on the stdin write would end Run by its timeout.
	res, err := Run(context.Background(), req)
	if err != nil || res.ExitCode != 0 || res.TimedOut || !strings.Contains(string(res.Stdout), "ignored") {
		t.Fatalf("Run: %+v, %v", res, err)
	}

	// One that neither reads nor exits ends by its timeout, not by a hang.
	pack = newPack(t, `exec sleep 300`)
	req = request(pack)
	req.Stdin = bytes.Repeat([]byte("z"), 8<<20)
	req.Timeout = 300 * time.Millisecond
	if _, err := Run(context.Background(), req); !errors.Is(err, reason.ErrTimeout) {
		t.Fatalf("err = %v", err)
	}
}

func TestEnvironment(t *testing.T) {
	planted := map[string]string{
		"OPENAI_API_KEY":           "sk-planted",
		"ANTHROPIC_API_KEY":        "planted",
		"AGENTNODE_SECRET":         "planted",
		"AGENTNODE_HOME":           "/planted",
		"SSH_AUTH_SOCK":            "/tmp/planted.sock",
		"DBUS_SESSION_BUS_ADDRESS": "unix:path=/planted",
		"DOCKER_HOST":              "unix:///planted",
		"XDG_RUNTIME_DIR":          "/run/user/planted",
		// more sockets and agents a host tool must not be pointed at
		"CONTAINER_HOST":        "unix:///planted.sock",
		"GNOME_KEYRING_CONTROL": "/run/user/planted/keyring",
		"GPG_AGENT_INFO":        "/planted/S.gpg-agent",
		"WAYLAND_DISPLAY":       "planted-0",
		"DISPLAY":               ":planted",
		"KRB5CCNAME":            "FILE:/planted",
		"GITHUB_TOKEN":          "planted",
		"LD_PRELOAD":            "/planted.so",
		"PACK_DIR":              "/planted",
	}
	for k, v := range planted {
		t.Setenv(k, v)
	}
	t.Setenv("PATH", "/planted/bin:"+os.Getenv("PATH"))
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("TZ", "UTC")

	pack := newPack(t, `env; echo "CWD=$(pwd)"`)
	link := filepath.Join(t.TempDir(), "pack-link")
	if err := os.Symlink(pack, link); err != nil {
		t.Fatal(err)
	}
	req := request(link)
	req.Env = append(AllowedEnv(os.Environ()), "HOME=/root", "TMPDIR=/planted")
	res, err := Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		env[k] = v
	}
	if strings.Contains(string(res.Stdout), "planted") {
		t.Errorf("a planted value reached the tool:\n%s", res.Stdout)
	}
	allowed := map[string]bool{"PATH": true, "LANG": true, "LC_ALL": true, "LC_CTYPE": true, "TZ": true,
		"TERM": true, "HOME": true, "TMPDIR": true, "PACK_DIR": true, "PWD": true, "CWD": true}
	for k := range env {
		if !allowed[k] {
			t.Errorf("tool sees %s", k)
		}
	}
	realPack, _ := filepath.EvalSymlinks(pack)
	if env["PATH"] != DefaultPath || env["LANG"] != "C.UTF-8" || env["TZ"] != "UTC" {
		t.Errorf("PATH=%q LANG=%q TZ=%q", env["PATH"], env["LANG"], env["TZ"])
	}
	if env["HOME"] != env["CWD"] || env["TMPDIR"] != env["CWD"] || env["CWD"] == "" {
		t.Errorf("HOME=%q TMPDIR=%q cwd=%q", env["HOME"], env["TMPDIR"], env["CWD"])
	}
	if env["PACK_DIR"] != realPack {
		t.Errorf("PACK_DIR=%q, want %q", env["PACK_DIR"], realPack)
	}
}

func TestAllowedEnv(t *testing.T) {
	got := AllowedEnv([]string{
		"PATH=/home/u/bin:/usr/bin", "LANG=de_DE.UTF-8", "LANG=fr_FR.UTF-8", "LANGUAGE=de",
		"LC_ALLX=1", "lang=x", "TERM", "TERM=xterm", "TZ=Europe/Berlin", "LC_CTYPE=C",
		"OPENAI_API_KEY=sk", "AGENTNODE_CONFIG=/x", "SSH_AUTH_SOCK=/s", "=LANG", "",
	})
	want := []string{"PATH=" + DefaultPath, "LANG=de_DE.UTF-8", "LC_CTYPE=C", "TZ=Europe/Berlin", "TERM=xterm"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("AllowedEnv = %q, want %q", got, want)
	}
	if got := AllowedEnv(nil); len(got) != 1 || got[0] != "PATH="+DefaultPath {
		t.Fatalf("AllowedEnv(nil) = %q", got)
	}
}

func TestWorkDirRemoved(t *testing.T) {
	cwdFile := filepath.Join(t.TempDir(), "cwd")
	pack := newPack(t, `pwd > "$1"
mkdir -p sub/deeper && echo x > sub/deeper/f && chmod 0 sub/deeper && chmod 0500 sub
ln -s / rootlink
echo data > "$TMPDIR/t" && echo data > "$HOME/h"
echo '{"ok":true,"result":1}'
`)
	res, err := Run(context.Background(), request(pack, cwdFile))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	cwd, _ := os.ReadFile(cwdFile)
	dir := string(bytes.TrimSpace(cwd))
	if dir == "" {
		t.Fatal("no work dir reported")
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("work dir %s still exists: %v", dir, err)
	}
	if _, err := os.Stat("/etc"); err != nil {
		t.Fatalf("removal followed the symlink: %v", err)
	}
}

func TestRemoveWorkDirUnwritable(t *testing.T) {
	// As root the permission bits do not stop removal; the unit test still
	// exercises the retry path when run as an ordinary user.
	dir := t.TempDir()
	work := filepath.Join(dir, "w")
	for _, d := range []string{"w/a/b", "w/c"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(dir, "outside")
	if err := os.Mkdir(outside, 0o500); err != nil {
		t.Fatal(err)
	}
	_ = os.Symlink(outside, filepath.Join(work, "c", "link"))
	_ = os.WriteFile(filepath.Join(work, "a", "b", "f"), []byte("x"), 0o400)
	_ = os.Chmod(filepath.Join(work, "a", "b"), 0)
	_ = os.Chmod(filepath.Join(work, "a"), 0o500)
	_ = os.Chmod(work, 0o500)
	if err := removeWorkDir(work); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(work); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("work dir survived: %v", err)
	}
	if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() != 0o500 {
		t.Fatalf("directory outside the work dir touched: %v %v", fi.Mode(), err)
	}
}

func TestEntrypointRefused(t *testing.T) {
	base := t.TempDir()
	pack := filepath.Join(base, "pack")
	if err := os.MkdirAll(filepath.Join(pack, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(base, "outside-ran")
	outside := filepath.Join(base, "outside.sh")
	writeTool(t, outside, `touch "`+marker+`"`)
	writeTool(t, filepath.Join(pack, "bin", "tool.sh"), `echo '{"ok":true,"result":"inside"}'`)
	if err := os.WriteFile(filepath.Join(pack, "noexec.sh"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"rel-link":   "../outside.sh",
		"abs-link":   outside,
		"dir-link":   "..",
		"etc-link":   "/bin",
		"inner-link": "bin/tool.sh",
		"dangling":   "nowhere",
	} {
		if err := os.Symlink(target, filepath.Join(pack, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ dir, entry string }{
		{pack, "../outside.sh"},
		{pack, outside},
		{pack, "rel-link"},
		{pack, "abs-link"},
		{pack, "dir-link/outside.sh"},
		{pack, "bin/../../outside.sh"},
		{pack, "etc-link/sh"},
		{pack, "dangling"},
		{pack, "missing.sh"},
		{pack, ""},
		{pack, "."},
		{pack, "bin"},
		{pack, "noexec.sh"},
		{"", "bin/tool.sh"},
		{filepath.Join(base, "nope"), "bin/tool.sh"},
		{outside, "x"},
	} {
		req := request(c.dir)
		req.Entrypoint = c.entry
		res, err := Run(context.Background(), req)
		if err == nil || res != nil {
			t.Errorf("%q in %q: ran (%+v)", c.entry, c.dir, res)
			continue
		}
		if !errors.Is(err, ErrEntrypoint) || reason.CodeOf(err) != reason.IntegrityDenied {
			t.Errorf("%q in %q: err = %v, want ErrEntrypoint/integrity_denied", c.entry, c.dir, err)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a script outside the package ran")
	}
	for _, entry := range []string{"bin/tool.sh", "inner-link", "bin/../bin/tool.sh", "./bin/tool.sh"} {
		req := request(pack)
		req.Entrypoint = entry
		res, err := Run(context.Background(), req)
		if err != nil || !strings.Contains(string(res.Stdout), "inside") {
			t.Errorf("%q refused: %v", entry, err)
		}
	}
}

// TestParentDeathKillsTool runs Run in a child copy of the test binary,
// SIGKILLs that child and checks that the tool dies with it (Pdeathsig).
func TestParentDeathKillsTool(t *testing.T) {
	dir := t.TempDir()
	pidFile, cwdFile := filepath.Join(dir, "tool.pid"), filepath.Join(dir, "cwd")
	pack := newPack(t, `pwd > "$2"
echo $$ > "$1"
exec sleep 300
`)
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperRunner$")
	helper.Env = append(os.Environ(), "HOSTEXEC_TEST_HELPER="+pack+"\x1f"+pidFile+"\x1f"+cwdFile)
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	tool := readPid(t, pidFile)
	if !alive(tool) {
		t.Fatalf("tool %d not running", tool)
	}
	_ = helper.Process.Kill()
	_ = helper.Wait()
	waitGone(t, tool, 30*time.Second)
	// A SIGKILLed agentnode cannot remove the work dir; tidy up after it.
	if cwd, _ := os.ReadFile(cwdFile); len(bytes.TrimSpace(cwd)) > 0 {
		_ = os.RemoveAll(string(bytes.TrimSpace(cwd)))
	}
}

func TestHelperRunner(t *testing.T) {
	spec := os.Getenv("HOSTEXEC_TEST_HELPER")
	if spec == "" {
		t.Skip("helper for TestParentDeathKillsTool")
	}
	parts := strings.Split(spec, "\x1f")
	if len(parts) != 3 {
		t.Fatalf("bad helper spec %q", spec)
	}
	pack, pidFile, cwdFile := parts[0], parts[1], parts[2]
	req := request(pack, pidFile, cwdFile)
	req.Timeout = time.Minute
	_, err := Run(context.Background(), req)
	fmt.Fprintln(os.Stderr, "helper: Run returned", err)
	os.Exit(1)
}
