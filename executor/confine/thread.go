package confine

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// kernelABI is LandlockABI; tests replace it to check that Start refuses
// what the kernel cannot do.
var kernelABI = LandlockABI

// Start confines a fresh OS thread as p says and calls start on it; start
// forks and execs the tool (exec.Cmd.Start), which inherits the thread's
// capabilities, no_new_privs, Landlock domain and seccomp filter: the tool
// is confined from its first instruction and cannot undo any of it. The
// rest of agentnode is untouched, since every one of these is a per-thread
// attribute and the thread never runs anything else: its goroutine stays
// locked to it and ends without unlocking, so the Go runtime destroys the
// thread (and never clones new threads from a locked one). The process's
// main thread is never used, since the runtime cannot end it.
//
// The thread stays alive until release is called: it is the tool's parent
// thread, so a parent-death signal (SysProcAttr.Pdeathsig) fires when it
// ends. Call release once the tool has been reaped.
//
// A confinement that cannot be applied is an error wrapping ErrConfine and
// start is not called; an error from start is returned as it is. In both
// cases the thread is gone when Start returns.
func Start(p *Policy, start func() error) (release func(), err error) {
	prog, err := filterProgram(p.Network)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfine, err)
	}
	abi := 0
	if p.Landlock != LandlockOff {
		abi = kernelABI()
		switch {
		case p.Landlock == LandlockRequired && abi < MinABI:
			return nil, fmt.Errorf("%w: landlock ABI %d, need %d", ErrConfine, abi, MinABI)
		case abi <= 0:
			return nil, fmt.Errorf("%w: landlock is not available", ErrConfine)
		}
	}
	ruleset := -1
	if abi > 0 {
		// The ruleset is built on any thread; only enforcing it is per
		// thread.
		if ruleset, err = p.landlockRuleset(abi); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfine, err)
		}
		defer unix.Close(ruleset)
	}

	started := make(chan error, 1)
	done := make(chan struct{})
	body := func() {
		if err := confineThread(ruleset, abi, prog); err != nil {
			started <- fmt.Errorf("%w: %w", ErrConfine, err)
			return
		}
		if err := start(); err != nil {
			started <- err
			return
		}
		started <- nil
		<-done
	}
	go func() {
		// Never unlocked once confined: the thread dies with its goroutine.
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			body()
			return
		}
		// The main thread cannot end (the runtime parks it for good), so
		// hand over to a goroutine that locks another thread: this one is
		// taken until that has happened.
		locked := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(locked)
			body()
		}()
		<-locked
		runtime.UnlockOSThread()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return func() { close(done) }, nil
}

// confineThread applies everything to the calling thread: capabilities
// first (dropping them needs CAP_SETPCAP, which they take away), then
// no_new_privs, Landlock and the seccomp filter.
func confineThread(ruleset, abi int, prog []unix.SockFilter) error {
	if err := dropCapabilities(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if ruleset >= 0 {
		if err := restrictSelf(ruleset, abi); err != nil {
			return err
		}
	}
	if len(prog) == 0 {
		return errors.New("empty seccomp program")
	}
	return loadFilter(prog)
}
