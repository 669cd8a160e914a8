package test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agentnode/agentnode/cmd/agentnode/termsafe"
)

// TestAttack runs the attack suite: one script per attack in attack/*.txtar,
// each driving the real binaries as an attacker would (a hostile package,
// input, file or fault) and asserting how the attack fails — the reason
// code, the errno the attacker saw, or the CPU time and memory agentnode
// stayed within. Attacker programs live in attack/<name>/main.go and are on
// hand as $EXTRA/attack-<name>.
func TestAttack(t *testing.T) {
	testscript.Run(t, scriptParams("attack"))
}

// bounded CPU MEM_MIB [!] CMD [ARG...] runs CMD like exec (or like ! exec),
// its stdout and stderr kept for later checks, and fails unless the process
// used at most CPU (a Go duration) of CPU time, user plus system, and at
// most MEM_MIB MiB of peak resident memory. Both come from the kernel's
// accounting of the process (wait4's rusage, through $EXTRA/rusage), never
// from the wall clock: a loaded machine slows the command down but does not
// make it use more CPU or memory. A negative control belongs in the script:
// the same command on an input that costs more must be seen to exceed it.
func cmdBounded(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 {
		ts.Fatalf("usage: bounded CPU MEM_MIB [!] command [args...]")
	}
	maxCPU, err := time.ParseDuration(args[0])
	if err != nil {
		ts.Fatalf("bounded: bad CPU time %q: %v", args[0], err)
	}
	maxMiB, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		ts.Fatalf("bounded: bad memory %q: %v", args[1], err)
	}
	args = args[2:]
	wantFail := false
	if args[0] == "!" {
		wantFail, args = true, args[1:]
		if len(args) == 0 {
			ts.Fatalf("usage: bounded CPU MEM_MIB [!] command [args...]")
		}
	}
	acct := ts.MkAbs(".rusage")
	err = ts.Exec(filepath.Join(extraDir, "rusage"), append([]string{"-o", acct}, args...)...)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		ts.Fatalf("bounded: %v", err)
	}
	if wantFail != (err != nil) {
		ts.Fatalf("%s: exit error %v, want failure=%v", args[0], err, wantFail)
	}
	var cpuNS, rssKiB int64
	if _, err := fmt.Sscanf(ts.ReadFile(acct), "cpu_ns=%d maxrss_kib=%d", &cpuNS, &rssKiB); err != nil {
		ts.Fatalf("bounded: accounting line: %v", err)
	}
	cpu, rssMiB := time.Duration(cpuNS), rssKiB/1024
	ts.Logf("bounded: %s used %v CPU, %d MiB peak RSS (bounds %v, %d MiB)", filepath.Base(args[0]), cpu, rssMiB, maxCPU, maxMiB)
	if cpu > maxCPU {
		ts.Fatalf("%s used %v of CPU, over the bound %v", args[0], cpu, maxCPU)
	}
	if rssMiB > maxMiB {
		ts.Fatalf("%s peaked at %d MiB resident, over the bound %d MiB", args[0], rssMiB, maxMiB)
	}
}

// jsonlines FILE checks FILE (stdout, stderr or a file of the script):
// every non-empty line is one valid JSON document, and no line carries a
// character a terminal acts on (termsafe.Unsafe: control, C1, bidi and
// other format characters) or a byte that is not UTF-8 — --json output
// must be exact JSON and harmless on a terminal.
func cmdJSONLines(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: jsonlines FILE")
	}
	n := 0
	for i, line := range strings.Split(ts.ReadFile(args[0]), "\n") {
		if line == "" {
			continue
		}
		n++
		if !json.Valid([]byte(line)) {
			ts.Fatalf("%s line %d is not JSON: %q", args[0], i+1, line)
		}
		for _, r := range line {
			if r == 0xfffd || termsafe.Unsafe(r) {
				ts.Fatalf("%s line %d carries %U: %q", args[0], i+1, r, line)
			}
		}
	}
	if n == 0 {
		ts.Fatalf("%s holds no JSON", args[0])
	}
}
