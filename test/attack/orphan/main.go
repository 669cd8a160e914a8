// Command orphan is the attacker of test/attack/orphan_*.txtar: a sandboxed
// tool that wants to outlive its run. It never answers, ignores every
// signal it may ignore, drops any parent-death signal it was given, and
// starts a copy of itself in a session of its own (argv[1] "child"), so
// that a kill of its process, its process group or its parent alone would
// leave something running. It reads the request and then sleeps forever.
//
// What must happen instead: when agentnode or the sandbox plugin is
// SIGKILLed mid-run, the whole sandbox — this process and its child — is
// still killed no later than the run's timeout (plus the 2 s the attack
// scripts allow), with no later run needed to reap it.
package main

import (
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGXCPU)
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, 0, 0, 0, 0)
	if len(os.Args) < 2 || os.Args[1] != "child" {
		if exe, err := os.Executable(); err == nil {
			cmd := exec.Command(exe, "child")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			_ = cmd.Start()
		}
		go func() { _, _ = io.Copy(io.Discard, os.Stdin) }()
	}
	for {
		time.Sleep(time.Hour)
	}
}
