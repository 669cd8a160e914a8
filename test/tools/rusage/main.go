// Command rusage runs a command with the caller's stdin, stdout and stderr,
// then writes the CPU time (user + system) and peak resident memory the
// kernel accounted to it as one line "cpu_ns=N maxrss_kib=N" to the file
// named by -o, and exits with the command's exit status. The attack suite's
// `bounded` command uses it to bound agentnode's resources on hostile input
// by the kernel's accounting rather than by the wall clock.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	out := flag.String("o", "", "file to write the accounting line to")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: rusage -o FILE command [args...]")
		os.Exit(2)
	}
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, "rusage:", err)
		os.Exit(2)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		fmt.Fprintln(os.Stderr, "rusage: no rusage")
		os.Exit(2)
	}
	line := fmt.Sprintf("cpu_ns=%d maxrss_kib=%d\n", ru.Utime.Nano()+ru.Stime.Nano(), ru.Maxrss)
	if err := os.WriteFile(*out, []byte(line), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "rusage:", err)
		os.Exit(2)
	}
	os.Exit(cmd.ProcessState.ExitCode())
}
