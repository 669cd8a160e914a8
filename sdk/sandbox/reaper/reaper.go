// Package reaper ends a sandbox run when the backend plugin that started it
// cannot: when the plugin process dies mid-run (SIGKILL, a crash, the OOM
// killer, or killed together with agentnode, which starts plugins with a
// parent-death signal) or hangs past the run's deadline. Without it such a
// container runs on, past its timeout, until some later run of the backend
// sweeps it up.
//
// The reaper is a small process of the plugin's own binary: on first use a
// backend re-executes itself (/proc/self/exe, the running binary, whatever
// is at its path now) with the single argument Arg in a new session (so
// neither the host's kill of the plugin's process group nor a terminal's
// signals reach it) and without a parent-death signal. It is connected to
// the plugin by a pipe it only reads, and it learns everything from that
// pipe:
//
//   - Arm, before the backend starts a run's process, hands it what the
//     backend needs to find that run's container (the target, JSON of the
//     backend's choosing) and the run's deadline: the timeout after Arm
//     plus Grace.
//   - Disarm, once the backend removed the container itself, forgets it.
//   - End of file — every copy of the write end is gone, which only
//     happens when the plugin process has exited (the write end is
//     close-on-exec and never handed to another process) — means the plugin
//     is gone. The reaper then at once calls the backend's Reap with
//     final=true for every run still armed (kill it, remove it and prove
//     it gone, as the plugin would have), waits for those, and exits.
//   - At a run's deadline, while the plugin still lives, it calls Reap with
//     final=false (kill only; the plugin, which normally killed the run
//     Grace earlier, still removes it).
//
// So an orphaned container is killed as soon as its plugin is gone, and no
// run outlives its deadline by more than Grace plus the time a kill takes,
// whether agentnode, the plugin or both were killed. The reaper only ever
// acts on the targets its own plugin armed: a container of another plugin
// process (another agentnode instance on the same machine) is never named
// to it. It lives exactly as long as its plugin plus the final reaps, each
// bounded by ReapTimeout.
//
// A backend wires it up in two places: Serve, first thing in an init
// function of its main package (so that the re-executed binary, and a test
// binary of the package, becomes the reaper instead of a plugin), and a
// *Reaper whose Arm and Disarm bracket each run.
package reaper

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Arg is the one argument a plugin binary is re-executed with to become its
// reaper.
const Arg = "agentnode-sandbox-reaper"

// Grace is how long after a run's deadline (its timeout after Arm) the
// reaper kills the run while the plugin is alive. The plugin's own timer,
// started after Arm, fires Grace earlier: the reaper is the backstop for a
// plugin that hangs, not the timer.
const Grace = time.Second

// ReapTimeout bounds one call of Reap.
const ReapTimeout = 2 * time.Minute

// maxMessage is PIPE_BUF on Linux: a write of at most this many bytes to a
// pipe is atomic, so a plugin killed while it writes leaves a message
// whole or not at all.
const maxMessage = 4096

// reapTries is how often a final reap that fails is tried.
const reapTries = 3

// Reap ends the container that target (the JSON a backend passed to Arm)
// names. It runs in the reaper process. With final false the run passed its
// deadline while its plugin lives: kill it, nothing more. With final true
// the plugin is gone: kill the container, remove it and prove it gone. A
// container that no longer exists (or never did) is not an error; one that
// is not the target's (its owner differs) must not be touched.
type Reap func(ctx context.Context, target json.RawMessage, final bool) error

// message is one line on the pipe.
type message struct {
	Op string `json:"op"` // "arm" or "disarm"
	ID uint64 `json:"id"`
	// Deadline is the CLOCK_MONOTONIC time in nanoseconds at which the
	// reaper kills the run while the plugin lives; 0: none.
	Deadline int64           `json:"deadline,omitempty"`
	Target   json.RawMessage `json:"target,omitempty"`
}

// Serve makes this process the reaper when it was started as one
// (os.Args[1] == Arg) and then never returns; otherwise it returns at once.
// Call it first in an init function of the backend's main package.
func Serve(reap Reap) {
	if len(os.Args) != 2 || os.Args[1] != Arg {
		return
	}
	// A terminal's signals and a broken pipe are not the reaper's end:
	// only its plugin's.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGPIPE)
	pipe := os.NewFile(3, "reaper")
	serve(pipe, reap)
	os.Exit(0)
}

// serve reads messages from r until end of file, then reaps what is still
// armed and returns when every reap has.
func serve(r io.Reader, reap Reap) {
	var wg sync.WaitGroup
	gone := make(chan struct{}) // closed at end of file: the plugin is gone
	armed := map[uint64]chan struct{}{}
	br := bufio.NewReaderSize(r, maxMessage)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				// Not a message of ours: skip to the next line.
				for errors.Is(err, bufio.ErrBufferFull) {
					_, err = br.ReadSlice('\n')
				}
				if err == nil {
					continue
				}
			}
			break // end of file or a read error: the plugin is gone
		}
		var m message
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		switch m.Op {
		case "arm":
			if _, dup := armed[m.ID]; dup {
				continue
			}
			disarmed := make(chan struct{})
			armed[m.ID] = disarmed
			wg.Add(1)
			go func() {
				defer wg.Done()
				watch(m, disarmed, gone, reap)
			}()
		case "disarm":
			if d, ok := armed[m.ID]; ok {
				close(d)
				delete(armed, m.ID)
			}
		}
	}
	close(gone)
	wg.Wait()
}

// watch waits for one run to be disarmed, to reach its deadline or to lose
// its plugin.
func watch(m message, disarmed, gone <-chan struct{}, reap Reap) {
	var deadline <-chan time.Time
	if m.Deadline > 0 {
		t := time.NewTimer(time.Duration(m.Deadline - monotonic()))
		defer t.Stop()
		deadline = t.C
	}
	select {
	case <-disarmed:
		return
	case <-gone:
	case <-deadline:
		ctx, cancel := context.WithTimeout(context.Background(), ReapTimeout)
		_ = reap(ctx, m.Target, false)
		cancel()
		select {
		case <-disarmed:
			return
		case <-gone:
		}
	}
	// Disarmed just before the plugin went: nothing to do.
	select {
	case <-disarmed:
		return
	default:
	}
	for try := 0; try < reapTries; try++ {
		if try > 0 {
			time.Sleep(time.Duration(try) * time.Second)
		}
		ctx, cancel := context.WithTimeout(context.Background(), ReapTimeout)
		err := reap(ctx, m.Target, true)
		cancel()
		if err == nil {
			return
		}
	}
}

// monotonic is CLOCK_MONOTONIC in nanoseconds: the same clock in the
// plugin and in its reaper.
func monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("reaper: clock_gettime: %v", err))
	}
	return ts.Nano()
}

// Reaper is a plugin's handle on its reaper process, which is started on
// first use and again should it have died. The zero value is not usable;
// use New.
type Reaper struct {
	mu     sync.Mutex
	w      *os.File      // the pipe's write end; nil before the start
	exited chan struct{} // closed when the reaper process has exited
	pid    int
	next   uint64
}

// New returns a Reaper that starts its process on first use.
func New() *Reaper { return &Reaper{} }

// Start starts the reaper process unless it runs. Arm starts it too; a
// backend may call Start when the plugin starts, off a run's path.
func (r *Reaper) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.startLocked()
}

// Pid is the reaper process's pid, or 0 before it started.
func (r *Reaper) Pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pid
}

func (r *Reaper) startLocked() error {
	if r.w != nil {
		select {
		case <-r.exited:
			// It died (killed by hand?): the runs it watched are no longer
			// watched; start another for the next ones.
			_ = r.w.Close()
			r.w = nil
		default:
			return nil
		}
	}
	pr, pw, err := os.Pipe() // both close-on-exec
	if err != nil {
		return fmt.Errorf("reaper: %w", err)
	}
	cmd := &exec.Cmd{
		// The running binary itself, even if its path was replaced.
		Path:       "/proc/self/exe",
		Args:       []string{os.Args[0], Arg},
		Env:        []string{},
		Dir:        "/",
		ExtraFiles: []*os.File{pr}, // fd 3
		// A session of its own, and no parent-death signal: it must
		// outlive this process and its process group.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	err = cmd.Start()
	_ = pr.Close()
	if err != nil {
		_ = pw.Close()
		return fmt.Errorf("reaper: starting %s: %w", Arg, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // no zombie while this process lives
		close(exited)
	}()
	r.w, r.exited, r.pid = pw, exited, cmd.Process.Pid
	return nil
}

// Run is one armed run.
type Run struct {
	r  *Reaper
	id uint64
	w  *os.File // the pipe it was armed on
}

// Arm hands target (marshalled to JSON) to the reaper for a run whose
// process is about to start with the given timeout (0: none). From then on
// the reaper reaps target at once should this process die, and kills it at
// timeout+Grace from now should it still not be disarmed. Start the run's
// own timer after Arm returns. An error means the run is not protected and
// must not start.
func (r *Reaper) Arm(target any, timeout time.Duration) (*Run, error) {
	raw, err := json.Marshal(target)
	if err != nil {
		return nil, fmt.Errorf("reaper: target: %w", err)
	}
	if timeout < 0 {
		return nil, fmt.Errorf("reaper: negative timeout %v", timeout)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	m := message{Op: "arm", ID: r.next, Target: raw}
	if timeout > 0 {
		m.Deadline = monotonic() + int64(timeout+Grace)
	}
	line, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("reaper: %w", err)
	}
	line = append(line, '\n')
	if len(line) > maxMessage {
		return nil, fmt.Errorf("reaper: target of %d bytes is too large", len(raw))
	}
	for try := 0; ; try++ {
		if err := r.startLocked(); err != nil {
			return nil, err
		}
		_, err := r.w.Write(line)
		if err == nil {
			return &Run{r: r, id: m.ID, w: r.w}, nil
		}
		if try > 0 {
			return nil, fmt.Errorf("reaper: arming a run: %w", err)
		}
		// EPIPE: the reaper died since the last run; start another.
		_ = r.w.Close()
		r.w = nil
	}
}

// Disarm tells the reaper the run is over and its container removed by the
// plugin. It is safe to call more than once and on nil.
func (run *Run) Disarm() {
	if run == nil || run.r == nil {
		return
	}
	r := run.r
	run.r = nil
	line, _ := json.Marshal(message{Op: "disarm", ID: run.id})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == run.w { // not a reaper started since, which never heard of it
		_, _ = r.w.Write(append(line, '\n'))
	}
}
