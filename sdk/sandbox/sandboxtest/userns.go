package sandboxtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// usernsReady is the line the probe's userns-host-ids prints once it waits.
const usernsReady = "userns-host-ids-ready\n"

// The host files of userns-host-file, in the package directory: mode 0600,
// one owned by the user running the suite (the invoking user), one by uid
// 1000, the host account that is the sandbox user where a backend has no
// user namespace.
const (
	privateOwnFile  = "private-own"
	private1000File = "private-1000"
)

// usernsChecks are the checks of the sandbox's own user namespace. A
// backend without one declares it (Config.NoUserNamespace): they then
// report "not applicable".
var usernsChecks = []check{
	probeCheckNA("userns-mapped", "the process is in a user namespace of its own: /proc/self/uid_map and gid_map are not the identity, and the sandbox user is another id on the host (not 1000, not 0)",
		func(*harness) ([]string, string) { return nil, "" }),
	probeCheckNA("userns-host-file", "a host file of mode 0600 owned by the invoking user, or by host uid 1000, mounted in (in /pack), cannot be read: the sandbox user is neither",
		func(h *harness) ([]string, string) {
			if len(h.privateFiles) == 0 {
				return nil, "no private host file could be made"
			}
			return h.privateFiles, ""
		}),
	{name: "userns-host-ids", what: "seen from the host (/proc/PID/status), the tool's process runs under mapped ids, not 0, not 1000, not the invoking user's nor any account's, and two concurrent sandboxes under different ones (neither can signal or ptrace the other)", run: checkUsernsHostIDs},
}

// notApplicable is the outcome of a user namespace check on a backend
// that declares it has none, or "".
func (h *harness) usernsNotApplicable() string {
	if h.cfg.NoUserNamespace == "" {
		return ""
	}
	return "not applicable: the backend declares no user namespace (Config.NoUserNamespace): " + h.cfg.NoUserNamespace
}

// probeCheckNA is a probeCheck that does not apply without a user
// namespace.
func probeCheckNA(name, what string, args func(h *harness) ([]string, string)) check {
	c := probeCheck(name, what, args)
	inner := c.run
	c.run = func(ctx context.Context, h *harness) outcome {
		if na := h.usernsNotApplicable(); na != "" {
			return outcome{skip: na}
		}
		return inner(ctx, h)
	}
	return c
}

// addPrivateFiles puts the host files of userns-host-file into the
// package directory. Owning one by uid 1000 needs root; without it only
// the invoking user's is made.
func (h *harness) addPrivateFiles() error {
	own := filepath.Join(h.pack, privateOwnFile)
	if err := os.WriteFile(own, []byte("sandboxtest-private-"+randomHex(8)), 0o600); err != nil {
		return fmt.Errorf("sandboxtest: %w", err)
	}
	h.privateFiles = append(h.privateFiles, "/pack/"+privateOwnFile)
	if os.Geteuid() != 0 {
		return nil
	}
	p := filepath.Join(h.pack, private1000File)
	if err := os.WriteFile(p, []byte("sandboxtest-private-"+randomHex(8)), 0o600); err != nil {
		return fmt.Errorf("sandboxtest: %w", err)
	}
	if err := os.Chown(p, 1000, 1000); err != nil {
		return fmt.Errorf("sandboxtest: %w", err)
	}
	h.privateFiles = append(h.privateFiles, "/pack/"+private1000File)
	return nil
}

// usernsRun is one of userns-host-ids' concurrent runs.
type usernsRun struct {
	token  string
	stdinW *io.PipeWriter
	stdout *lineWatch
	done   chan runResult
	uid    []string // Uid of /proc/PID/status: real, effective, saved, fs
	gid    []string
}

// checkUsernsHostIDs starts two runs that wait, reads each one's ids on
// the host while they do, lets them end and judges.
func checkUsernsHostIDs(ctx context.Context, h *harness) outcome {
	const name = "userns-host-ids"
	if na := h.usernsNotApplicable(); na != "" {
		return outcome{skip: na}
	}
	runs := make([]*usernsRun, 2)
	for i := range runs {
		stdin, w := io.Pipe()
		r := &usernsRun{token: "sandboxtest-userns-" + randomHex(8), stdinW: w, stdout: newLineWatch(usernsReady), done: make(chan runResult, 1)}
		runs[i] = r
		go func() {
			r.done <- h.exec(ctx, name, runOpts{args: []string{name, r.token}, stdin: stdin, stdout: r.stdout})
			stdin.Close()
		}()
	}
	results := make([]runResult, len(runs))
	ended := make([]bool, len(runs))
	var problems []string
	for i, r := range runs {
		select {
		case <-r.stdout.seen:
		case results[i] = <-r.done:
			ended[i] = true
			problems = append(problems, fmt.Sprintf("run %d ended before it was looked at", i+1))
		}
	}
	for _, r := range runs {
		pid := 0
		for _, p := range probeProcesses(h.bins) {
			if cmd, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline"); err == nil && strings.Contains(string(cmd), r.token) {
				pid = p
			}
		}
		if pid == 0 {
			problems = append(problems, "no host process runs the probe with token "+r.token)
			continue
		}
		r.uid, r.gid = statusIDs(pid, "Uid"), statusIDs(pid, "Gid")
	}
	// Both end together: each run's leftover check waits for every probe
	// process, the other run's too.
	for _, r := range runs {
		r.stdinW.Close()
	}
	for i, r := range runs {
		if !ended[i] {
			results[i] = <-r.done
		}
		results[i].stdout = r.stdout.capBuffer
	}
	var details []string
	for i, res := range results {
		o := judge(name, res, false)
		if !o.ok {
			return fail("run %d: %s", i+1, o.detail)
		}
		details = append(details, fmt.Sprintf("run %d: host Uid %v Gid %v (%s)", i+1, runs[i].uid, runs[i].gid, o.detail))
	}
	problems = append(problems, judgeHostIDs(runs[0].uid, runs[1].uid, "uid")...)
	problems = append(problems, judgeHostIDs(runs[0].gid, runs[1].gid, "gid")...)
	if len(problems) > 0 {
		return fail("%s\n(%s)", strings.Join(problems, "; "), strings.Join(details, "; "))
	}
	return pass("%s", strings.Join(details, "; "))
}

// statusIDs returns the fields of the "Uid:" or "Gid:" line of
// /proc/PID/status (nil when it cannot be read).
func statusIDs(pid int, key string) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			return strings.Fields(v)
		}
	}
	return nil
}

// judgeHostIDs checks two runs' host ids of one kind: all four the same
// per run, none 0, 1000, the suite's own or a host account's, and the two
// runs' different.
func judgeHostIDs(a, b []string, kind string) []string {
	var problems []string
	self := os.Geteuid()
	lookup := func(id string) error { _, err := user.LookupId(id); return err }
	if kind == "gid" {
		self = os.Getegid()
		lookup = func(id string) error { _, err := user.LookupGroupId(id); return err }
	}
	for i, ids := range [][]string{a, b} {
		if len(ids) != 4 {
			problems = append(problems, fmt.Sprintf("run %d: host %ss %v unreadable", i+1, kind, ids))
			continue
		}
		for _, id := range ids {
			switch {
			case id != ids[0]:
				problems = append(problems, fmt.Sprintf("run %d: host %ss %v differ", i+1, kind, ids))
			case id == "0" || id == "1000" || id == strconv.Itoa(self):
				problems = append(problems, fmt.Sprintf("run %d: host %s %s is not a mapped id", i+1, kind, id))
			case lookup(id) == nil:
				problems = append(problems, fmt.Sprintf("run %d: host %s %s is an account of this host", i+1, kind, id))
			default:
				continue
			}
			break
		}
	}
	if len(a) == 4 && len(b) == 4 && a[0] == b[0] {
		problems = append(problems, fmt.Sprintf("two concurrent sandboxes run under the same host %s %s", kind, a[0]))
	}
	return problems
}
