package test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// orphanSafetyNet bounds every wait of the orphan command. It is a safety
// net against a hung test, never the property under test: the deadline is
// checked on the kernel's own timestamps.
const orphanSafetyNet = 60 * time.Second

// orphanSlack is what the attack scripts allow past a run's timeout.
const orphanSlack = 2 * time.Second

// orphan [-engine E] [-also MARKER] KILL TIMEOUT MARKER CMD [ARG...]
//
// starts CMD (an `agentnode run` of a sandboxed tool whose entrypoint is
// named MARKER, the orphan attacker), waits until the tool and the child it
// starts run in their sandbox, SIGKILLs KILL — "agentnode" (CMD itself),
// "plugin" (the sandbox plugin agentnode started) or "both"; "stop" sends
// the plugin SIGSTOP instead (a plugin that hangs), and SIGKILLs agentnode
// once the tool is dead — and then
// checks, from the kernel's process events (the proc connector's exec and
// exit events and their CLOCK_MONOTONIC timestamps, not the wall clock of
// this test), that every process of the tool was still alive when its
// owner was killed and ended no later than TIMEOUT+2s after the tool was
// exec'd. It then waits until the sandbox is gone without any further run:
// its cgroup directories in every hierarchy and, with -engine docker or
// podman, the engine's container (-engine libcontainer: the state
// directory). With -also, the tool of another run (MARKER, of another
// agentnode process started before) must be running when KILL is killed
// and must still run when this run's tool has been killed. CMD's stdout and
// stderr go to orphan.stdout and orphan.stderr in $WORK.
func cmdOrphan(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("orphan does not take !")
	}
	fs := flag.NewFlagSet("orphan", flag.ContinueOnError)
	engine := fs.String("engine", "", "libcontainer, docker or podman")
	also := fs.String("also", "", "marker of another run that must be untouched")
	if err := fs.Parse(args); err != nil || fs.NArg() < 4 {
		ts.Fatalf("usage: orphan [-engine E] [-also MARKER] agentnode|plugin|both TIMEOUT MARKER command [args...]")
	}
	kill, marker, argv := fs.Arg(0), fs.Arg(2), fs.Args()[3:]
	timeout, err := time.ParseDuration(fs.Arg(1))
	if err != nil || timeout <= 0 {
		ts.Fatalf("orphan: bad timeout %q", fs.Arg(1))
	}
	if kill != "agentnode" && kill != "plugin" && kill != "both" && kill != "stop" {
		ts.Fatalf("orphan: kill agentnode, plugin, both or stop, not %q", kill)
	}

	ev, err := listenProcEvents()
	ts.Check(err)
	defer ev.close()

	path := argv[0]
	if !strings.Contains(path, "/") {
		// The script's PATH, not the test's.
		for _, d := range filepath.SplitList(ts.Getenv("PATH")) {
			if fi, err := os.Stat(filepath.Join(d, argv[0])); err == nil && fi.Mode().IsRegular() {
				path = filepath.Join(d, argv[0])
				break
			}
		}
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = scriptEnv(ts)
	stdout, err := os.Create(ts.MkAbs("orphan.stdout"))
	ts.Check(err)
	defer stdout.Close()
	stderr, err := os.Create(ts.MkAbs("orphan.stderr"))
	ts.Check(err)
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	ts.Check(cmd.Start())
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()

	// The tool (pid 1 of its sandbox) and its child, in a pid namespace
	// that is not ours.
	tool, child := waitMarker(ts, marker, exited)
	start, ok := ev.execTime(tool.pid, orphanSafetyNet)
	if !ok {
		ts.Fatalf("orphan: no exec event of the tool (pid %d) within %v%s", tool.pid, orphanSafetyNet, ev.lostNote())
	}
	var other *markedProc
	if *also != "" {
		o, _ := waitMarker(ts, *also, nil)
		other = &o
	}
	victims := []int{cmd.Process.Pid}
	if kill != "agentnode" {
		p := pluginOf(cmd.Process.Pid)
		if p == 0 {
			ts.Fatalf("orphan: no sandbox plugin process under agentnode (pid %d)", cmd.Process.Pid)
		}
		victims = []int{p}
		if kill == "both" {
			victims = append(victims, cmd.Process.Pid)
		}
	}
	sig := syscall.SIGKILL
	if kill == "stop" {
		sig = syscall.SIGSTOP
		defer syscall.Kill(victims[0], syscall.SIGKILL)
	}
	killedAt := monotonicNS()
	for i, pid := range victims {
		err := syscall.Kill(pid, sig)
		if i > 0 && errors.Is(err, syscall.ESRCH) {
			// "both": agentnode can end (fail closed, reaped) in the
			// instant after its plugin was killed: it is gone either way.
			ts.Logf("orphan: pid %d had already ended when its signal came", pid)
			continue
		}
		ts.Check(err)
	}
	ts.Logf("orphan: sent %v to %s %v; tool pid %d and child pid %d (cgroup %s)", sig, kill, victims, tool.pid, child.pid, tool.cgroup)

	var end int64
	for _, p := range []markedProc{tool, child} {
		t, ok := ev.exitTime(p.pid, orphanSafetyNet)
		if !ok {
			ts.Fatalf("orphan: pid %d of the tool still runs %v after its owner was killed%s", p.pid, orphanSafetyNet, ev.lostNote())
		}
		if t < killedAt {
			ts.Fatalf("orphan: pid %d of the tool ended before its owner was killed: nothing was tested", p.pid)
		}
		end = max(end, t)
	}
	lifetime := time.Duration(end - start)
	ts.Logf("orphan: the tool lived %v from its exec (timeout %v); killed %v after its owner", lifetime, timeout, time.Duration(end-killedAt))
	if lifetime > timeout+orphanSlack {
		ts.Fatalf("orphan: the tool lived %v, past its timeout %v + %v", lifetime, timeout, orphanSlack)
	}
	if other != nil {
		if _, gone := ev.exitTime(other.pid, 0); gone {
			ts.Fatalf("orphan: the other run's tool (pid %d) was killed too", other.pid)
		}
	}
	if kill == "stop" {
		// The hung plugin's run was killed at its deadline; removing it is
		// the plugin's job, or its reaper's once the plugin is gone: end
		// agentnode (the stopped plugin dies with it).
		ts.Check(cmd.Process.Kill())
	}

	// Gone, without another run: its cgroups, its engine container or
	// state.
	for _, dir := range tool.cgroupDirs {
		waitAbsent(ts, "cgroup "+dir, func() bool { _, err := os.Lstat(dir); return errors.Is(err, os.ErrNotExist) })
	}
	id := regexp.MustCompile(`[0-9a-f]{64}`).FindString(tool.cgroup)
	switch *engine {
	case "":
	case "libcontainer":
		dir := filepath.Join("/run/agentnode/libcontainer", filepath.Base(tool.cgroup))
		waitAbsent(ts, "state "+dir, func() bool { _, err := os.Lstat(dir); return errors.Is(err, os.ErrNotExist) })
	case "docker", "podman":
		if id == "" {
			ts.Fatalf("orphan: no container id in cgroup %s", tool.cgroup)
		}
		waitAbsent(ts, *engine+" container "+id, func() bool {
			out, err := exec.Command(*engine, "container", "inspect", "--format", "{{.Id}}", id).CombinedOutput()
			return err != nil && bytes.Contains(bytes.ToLower(out), []byte("no such"))
		})
	default:
		ts.Fatalf("orphan: unknown engine %q", *engine)
	}
	ts.Logf("orphan: gone: %d cgroup directories, and the %s container", len(tool.cgroupDirs), *engine)

	select {
	case <-exited:
	case <-time.After(orphanSafetyNet):
		ts.Fatalf("orphan: %s still runs %v after the kill", argv[0], orphanSafetyNet)
	}
}

// scriptEnv is the script's environment for a process this command starts.
func scriptEnv(ts *testscript.TestScript) []string {
	keys := append([]string{"PATH", "HOME", "AGENTNODE_HOME", "AGENTNODE_NON_INTERACTIVE", "AGENTNODE_CONFIG",
		"AGENTNODE_LOCKFILE", "TMPDIR", "WORK", "BIN", "EXTRA"}, passEnv...)
	env := []string{}
	for _, k := range keys {
		if v := ts.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// markedProc is a process of a sandboxed tool.
type markedProc struct {
	pid        int
	cgroup     string   // its cgroup path (the pids or unified hierarchy)
	cgroupDirs []string // its cgroup directory in every hierarchy
}

// waitMarker waits until the tool named marker (argv[0]'s or argv[1]'s
// base name) runs as pid 1 of a pid namespace other than ours together with
// its child ("child" argument), and returns both. exited, when it closes,
// means the command ended before that.
func waitMarker(ts *testscript.TestScript, marker string, exited <-chan struct{}) (tool, child markedProc) {
	ours, _ := os.Readlink("/proc/self/ns/pid")
	deadline := time.Now().Add(orphanSafetyNet)
	for time.Now().Before(deadline) {
		var found []markedProc
		var childFound markedProc
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err != nil {
				continue
			}
			argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
			match := filepath.Base(argv[0]) == marker || (len(argv) > 1 && filepath.Base(argv[1]) == marker)
			if !match {
				continue
			}
			if ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); ns == ours || ns == "" {
				continue
			}
			p := markedProc{pid: pid}
			p.cgroup, p.cgroupDirs = cgroupOf(pid)
			switch {
			case len(argv) > 1 && argv[1] == "child":
				childFound = p
			case nsPid(pid) == 1:
				found = append(found, p)
			}
		}
		if len(found) == 1 && (childFound.pid != 0 || exited == nil) {
			return found[0], childFound
		}
		select {
		case <-exited:
			ts.Fatalf("orphan: the command ended before its tool %s ran", marker)
		case <-time.After(20 * time.Millisecond):
		}
	}
	ts.Fatalf("orphan: the tool %s did not run within %v", marker, orphanSafetyNet)
	return
}

// nsPid is pid's pid in its own (innermost) pid namespace.
func nsPid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f, ok := strings.CutPrefix(l, "NSpid:"); ok {
			fs := strings.Fields(f)
			n, _ := strconv.Atoi(fs[len(fs)-1])
			return n
		}
	}
	return 0
}

// cgroupOf returns pid's cgroup path (from the pids controller, else the
// unified hierarchy) and its directory in every mounted hierarchy.
func cgroupOf(pid int) (string, []string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", nil
	}
	mounts, _ := mountinfo.GetMounts(func(m *mountinfo.Info) (bool, bool) {
		return m.FSType != "cgroup" && m.FSType != "cgroup2", false
	})
	var path string
	var dirs []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		ctrls, p := f[1], f[2]
		if ctrls == "pids" || (path == "" && f[0] == "0") {
			path = p
		}
		for _, m := range mounts {
			if m.Root != "/" {
				continue
			}
			if (f[0] == "0" && m.FSType == "cgroup2") || (f[0] != "0" && m.FSType == "cgroup" && hasAll(m.VFSOptions, ctrls)) {
				dirs = append(dirs, filepath.Join(m.Mountpoint, p))
			}
		}
	}
	return path, dirs
}

func hasAll(opts, ctrls string) bool {
	have := strings.Split(opts, ",")
	for _, c := range strings.Split(ctrls, ",") {
		found := false
		for _, h := range have {
			if h == c {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// pluginOf is the sandbox plugin child of agentnode process pid, or 0.
func pluginOf(pid int) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p))
		if !strings.HasPrefix(filepath.Base(exe), "agentnode-sandbox-") {
			continue
		}
		if ppid(p) == pid {
			return p
		}
	}
	return 0
}

func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// waitGone polls gone until it holds (the safety net fails the script).
func waitAbsent(ts *testscript.TestScript, what string, gone func() bool) {
	deadline := time.Now().Add(orphanSafetyNet)
	for !gone() {
		if time.Now().After(deadline) {
			ts.Fatalf("orphan: %s is still there %v after the tool was killed, and no later run came", what, orphanSafetyNet)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func monotonicNS() int64 {
	var t unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &t)
	return t.Nano()
}

// --- the kernel's process events (the proc connector) ---

// Linux's connector and proc event constants (linux/connector.h,
// linux/cn_proc.h).
const (
	cnIdxProc         = 1
	cnValProc         = 1
	procCnMcastListen = 1
	procEventExec     = 0x00000002
	procEventExit     = 0x80000000
	cnMsgLen          = 20 // struct cn_msg without data
)

// procEvents records the exec and exit times (CLOCK_MONOTONIC ns, as the
// kernel stamped them) of every process from the moment it listens.
type procEvents struct {
	sock *nl.NetlinkSocket
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex
	cond  *sync.Cond
	execs map[int]int64 // pid → its last exec
	exits map[int]int64 // tgid → its leader's exit
	lost  bool          // the receive buffer overflowed once
}

func listenProcEvents() (*procEvents, error) {
	s, err := nl.Subscribe(unix.NETLINK_CONNECTOR, cnIdxProc)
	if err != nil {
		return nil, fmt.Errorf("proc connector: %w", err)
	}
	_ = s.SetReceiveBufferSize(16<<20, true)
	if err := s.SetReceiveTimeout(&unix.Timeval{Usec: 200000}); err != nil {
		s.Close()
		return nil, err
	}
	// PROC_CN_MCAST_LISTEN with a filter (Linux 6.6+; older kernels
	// ignore it and send every event): exec and exit events only.
	data := make([]byte, cnMsgLen+8)
	binary.NativeEndian.PutUint32(data[0:], cnIdxProc)
	binary.NativeEndian.PutUint32(data[4:], cnValProc)
	binary.NativeEndian.PutUint16(data[16:], 8)
	binary.NativeEndian.PutUint32(data[20:], procCnMcastListen)
	binary.NativeEndian.PutUint32(data[24:], procEventExec|procEventExit)
	req := &nl.NetlinkRequest{NlMsghdr: unix.NlMsghdr{Type: unix.NLMSG_DONE, Pid: uint32(os.Getpid())}}
	req.AddRawData(data)
	if err := s.Send(req); err != nil {
		s.Close()
		return nil, fmt.Errorf("proc connector: listen: %w", err)
	}
	e := &procEvents{sock: s, stop: make(chan struct{}), done: make(chan struct{}), execs: map[int]int64{}, exits: map[int]int64{}}
	e.cond = sync.NewCond(&e.mu)
	go e.receive()
	return e, nil
}

func (e *procEvents) receive() {
	defer close(e.done)
	for {
		select {
		case <-e.stop:
			return
		default:
		}
		msgs, _, err := e.sock.Receive()
		if err != nil {
			if errors.Is(err, unix.ENOBUFS) {
				e.mu.Lock()
				e.lost = true
				e.mu.Unlock()
			}
			continue // timeouts wake us to look at stop
		}
		e.mu.Lock()
		for _, m := range msgs {
			d := m.Data
			if len(d) < cnMsgLen+16+8 {
				continue
			}
			ev := d[cnMsgLen:]
			what := binary.NativeEndian.Uint32(ev[0:])
			ts := int64(binary.NativeEndian.Uint64(ev[8:]))
			pid := int(binary.NativeEndian.Uint32(ev[16:]))
			tgid := int(binary.NativeEndian.Uint32(ev[20:]))
			switch what {
			case procEventExec:
				e.execs[pid] = ts
			case procEventExit:
				if pid == tgid {
					e.exits[tgid] = ts
				}
			}
		}
		e.cond.Broadcast()
		e.mu.Unlock()
	}
}

// wait waits up to d for get to find pid's event.
func (e *procEvents) wait(m map[int]int64, pid int, d time.Duration) (int64, bool) {
	deadline := time.Now().Add(d)
	wake := time.AfterFunc(d, func() { e.mu.Lock(); e.cond.Broadcast(); e.mu.Unlock() })
	defer wake.Stop()
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		if t, ok := m[pid]; ok {
			return t, true
		}
		if !time.Now().Before(deadline) {
			return 0, false
		}
		e.cond.Wait()
	}
}

func (e *procEvents) execTime(pid int, d time.Duration) (int64, bool) { return e.wait(e.execs, pid, d) }
func (e *procEvents) exitTime(pid int, d time.Duration) (int64, bool) { return e.wait(e.exits, pid, d) }

func (e *procEvents) lostNote() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lost {
		return " (the kernel dropped process events: the receive buffer overflowed)"
	}
	return ""
}

func (e *procEvents) close() {
	close(e.stop)
	<-e.done
	e.sock.Close()
}
