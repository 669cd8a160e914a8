package audit

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/kernel/reason"
)

// The test binary re-executes itself as a child process in these modes.
const childEnv = "AGENTNODE_AUDIT_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "append":
		os.Exit(childAppend())
	case "readonly":
		os.Exit(childReadOnly())
	case "crash":
		os.Exit(childCrash())
	default:
		fmt.Fprintln(os.Stderr, "unknown child mode")
		os.Exit(2)
	}
}

// childAppend appends AUDIT_N records tagged with AUDIT_ID to AUDIT_DIR.
func childAppend() int {
	dir, id := os.Getenv("AUDIT_DIR"), os.Getenv("AUDIT_ID")
	n, _ := strconv.Atoi(os.Getenv("AUDIT_N"))
	maxSize, _ := strconv.ParseInt(os.Getenv("AUDIT_MAX_SIZE"), 10, 64)
	opts := Options{MaxSizeBytes: maxSize, MaxFiles: 1000}
	if path := os.Getenv("AUDIT_ANCHOR"); path != "" {
		key, err := hex.DecodeString(os.Getenv("AUDIT_KEY"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		opts.Anchor = &Anchor{Path: path, Key: func(string) ([]byte, error) { return key, nil }}
	}
	l, err := Open(dir, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	for i := range n {
		r := typical(i)
		r.RequestID = fmt.Sprintf("%s-%d", id, i)
		if err := l.Append(r); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

func child(t *testing.T, mode string, env ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{childEnv + "=" + mode}, env...)...)
	return cmd
}

func TestConcurrentProcessesKeepOneChain(t *testing.T) {
	dir := t.TempDir()
	const procs, each = 4, 60
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for p := range procs {
		cmd := child(t, "append", "AUDIT_DIR="+dir, fmt.Sprintf("AUDIT_ID=p%d", p),
			fmt.Sprintf("AUDIT_N=%d", each), "AUDIT_MAX_SIZE=8192")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
	}
	rep, err := verify(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Records != procs*each || rep.LastSeq != procs*each {
		t.Fatalf("report %+v", rep)
	}
	if rep.Files < 3 {
		t.Errorf("only %d files: rotation was not exercised", rep.Files)
	}
	recs, err := Tail(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	ids := map[string]bool{}
	interleaved := false
	for i, r := range recs {
		if seen[r.Seq] {
			t.Fatalf("duplicate seq %d", r.Seq)
		}
		seen[r.Seq] = true
		if ids[r.RequestID] {
			t.Fatalf("request %s logged twice", r.RequestID)
		}
		ids[r.RequestID] = true
		if i > 0 && strings.Split(r.RequestID, "-")[0] != strings.Split(recs[i-1].RequestID, "-")[0] {
			interleaved = true
		}
	}
	if len(ids) != procs*each {
		t.Fatalf("%d distinct requests, want %d", len(ids), procs*each)
	}
	t.Logf("%d records in %d files, processes interleaved: %v", rep.Records, rep.Files, interleaved)
}

func TestConcurrentGoroutines(t *testing.T) {
	dir := t.TempDir()
	logs := []*Log{openT(t, dir, Options{MaxSizeBytes: 4096}), openT(t, dir, Options{MaxSizeBytes: 4096})}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				r := typical(i)
				r.RequestID = fmt.Sprintf("g%d-%d", g, i)
				if err := logs[g%2].Append(r); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// MaxFiles 5 dropped the oldest files; what is left must chain.
	rep, err := Verify(dir)
	if err != nil || !rep.OK || rep.LastSeq != 120 {
		t.Fatalf("report %+v %v", rep, err)
	}
}

// --- the audit cannot be written: every way ends in ErrAuditUnavailable ---

func wantUnavailable(t *testing.T, err error, cause error) {
	t.Helper()
	if !errors.Is(err, reason.ErrAuditUnavailable) || reason.CodeOf(err) != reason.AuditUnavailable {
		t.Fatalf("err = %v, want audit_unavailable", err)
	}
	if cause != nil && !errors.Is(err, cause) {
		t.Fatalf("err = %v, want cause %v", err, cause)
	}
}

func TestOpenFailsWhenDirIsAFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, Options{})
	wantUnavailable(t, err, syscall.ENOTDIR)
}

func TestOpenFailsWhenLogIsNotAFile(t *testing.T) {
	t.Run("directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(activePath(dir), 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir, Options{})
		wantUnavailable(t, err, syscall.EISDIR)
	})
	t.Run("symlink", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(t.TempDir(), "elsewhere.jsonl")
		if err := os.Symlink(target, activePath(dir)); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir, Options{})
		wantUnavailable(t, err, syscall.ELOOP)
		if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("Open followed the symlink")
		}
	})
}

// chattr sets or clears the immutable attribute, which stops even root.
func chattr(t *testing.T, flag, path string) {
	t.Helper()
	if out, err := exec.Command("chattr", flag, path).CombinedOutput(); err != nil {
		t.Skipf("chattr %s unavailable here: %v %s", flag, err, out)
	}
}

func TestAppendFailsOnImmutableLog(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{})
	appendN(t, l, 0, 2)
	// The control: whether this filesystem refuses a write through a
	// descriptor opened before the file became immutable. ext4 and xfs do;
	// tmpfs (a /tmp of many machines) checks the flag only at open.
	enforced := immutableStopsOpenWrites(t, dir)
	chattr(t, "+i", activePath(dir))
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", activePath(dir)).Run() })

	want := uint64(3)
	if enforced {
		wantUnavailable(t, l.Append(typical(2)), syscall.EPERM)
	} else {
		t.Log("this filesystem lets a descriptor opened before chattr +i write on: the open Log appends")
		if err := l.Append(typical(2)); err != nil {
			t.Fatalf("append through the open descriptor: %v", err)
		}
		want = 4
	}
	// A new Log cannot even open it for writing.
	_, err := Open(dir, Options{})
	wantUnavailable(t, err, syscall.EPERM)

	chattr(t, "-i", activePath(dir))
	r := typical(3)
	if err := l.Append(r); err != nil || r.Seq != want {
		t.Fatalf("append after chattr -i: seq %d (want %d) %v", r.Seq, want, err)
	}
	if rep, err := Verify(dir); err != nil || !rep.OK || rep.Records != int(want) {
		t.Fatalf("report %+v %v", rep, err)
	}
}

// immutableStopsOpenWrites reports whether the filesystem of dir refuses
// a write through a descriptor opened before chattr +i.
func immutableStopsOpenWrites(t *testing.T, dir string) bool {
	t.Helper()
	probe := filepath.Join(dir, "probe")
	f, err := os.OpenFile(probe, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = f.Close()
		_ = exec.Command("chattr", "-i", probe).Run()
		_ = os.Remove(probe)
	}()
	chattr(t, "+i", probe)
	_, err = f.Write([]byte("x\n"))
	return errors.Is(err, syscall.EPERM)
}

func TestOpenFailsInImmutableDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	chattr(t, "+i", dir)
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", dir).Run() })
	_, err := Open(dir, Options{})
	wantUnavailable(t, err, syscall.EPERM)
}

func TestRotationFailsInImmutableDir(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{MaxSizeBytes: 1024})
	appendN(t, l, 0, 1)
	chattr(t, "+i", dir)
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", dir).Run() })
	err := l.Append(typical(1)) // would exceed 1 KiB: must rotate, cannot rename
	wantUnavailable(t, err, syscall.EPERM)
	if n := len(readLinesT(t, activePath(dir))); n != 1 {
		t.Fatalf("%d lines, want 1", n)
	}
}

func TestAppendFailsWhenLogReplacedByDirectory(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{})
	appendN(t, l, 0, 1)
	if err := os.Rename(activePath(dir), filepath.Join(dir, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(activePath(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	wantUnavailable(t, l.Append(typical(1)), syscall.EISDIR)
}

func TestAppendAfterClose(t *testing.T) {
	l, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	wantUnavailable(t, l.Append(typical(0)), nil)
}

// childReadOnly runs in its own mount namespace: it bind-mounts AUDIT_DIR
// read-only over itself, then tries to open the log, and prints what
// happened as JSON.
func childReadOnly() int {
	dir := os.Getenv("AUDIT_DIR")
	res := map[string]any{}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		res["mount_error"] = err.Error()
	} else if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		res["mount_error"] = err.Error()
	} else {
		_, err := Open(dir, Options{})
		res["open_error"] = fmt.Sprint(err)
		res["open_unavailable"] = errors.Is(err, reason.ErrAuditUnavailable)
		res["open_erofs"] = errors.Is(err, syscall.EROFS)
		rep, err := Verify(dir)
		res["verify_error"] = fmt.Sprint(err)
		if rep != nil {
			res["verify_ok"], res["verify_records"] = rep.OK, rep.Records
		}
		recs, err := Tail(dir, 10)
		res["tail_error"], res["tail_records"] = fmt.Sprint(err), len(recs)
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

func TestOpenFailsOnReadOnlyMount(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{})
	appendN(t, l, 0, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := child(t, "readonly", "AUDIT_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("cannot start a child in a new mount namespace: %v %s", err, stderr.String())
	}
	var res struct {
		MountError      string `json:"mount_error"`
		OpenError       string `json:"open_error"`
		OpenUnavailable bool   `json:"open_unavailable"`
		OpenEROFS       bool   `json:"open_erofs"`
		VerifyError     string `json:"verify_error"`
		VerifyOK        bool   `json:"verify_ok"`
		VerifyRecords   int    `json:"verify_records"`
		TailError       string `json:"tail_error"`
		TailRecords     int    `json:"tail_records"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	if res.MountError != "" {
		t.Skipf("read-only bind mount not possible here: %s", res.MountError)
	}
	if !res.OpenUnavailable || !res.OpenEROFS {
		t.Fatalf("Open on a read-only mount: %s (unavailable %v, EROFS %v)", res.OpenError, res.OpenUnavailable, res.OpenEROFS)
	}
	// Reading still works: verify and tail need no write access.
	if res.VerifyError != "<nil>" || !res.VerifyOK || res.VerifyRecords != 3 || res.TailError != "<nil>" || res.TailRecords != 3 {
		t.Fatalf("read-only reads: %+v", res)
	}
	// The mount lived only in the child's namespace.
	l2 := openT(t, dir, Options{})
	appendN(t, l2, 3, 1)
}
