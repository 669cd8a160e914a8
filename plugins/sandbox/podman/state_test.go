package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agentnode/agentnode/sdk/sandbox"
)

// fakeState is a podmanState over a database and storage directories in a
// temporary directory, laid out as podman 4.3 lays them out.
func fakeState(t *testing.T) *podmanState {
	t.Helper()
	root := t.TempDir()
	s := &podmanState{
		dbPath:      filepath.Join(root, "graph", "libpod", "bolt_state.db"),
		lockTimeout: 200 * time.Millisecond,
		graphRoot:   filepath.Join(root, "graph"),
		runRoot:     filepath.Join(root, "run"),
		graphDriver: "overlay",
	}
	for _, d := range []string{filepath.Dir(s.dbPath), filepath.Join(s.graphRoot, "overlay-containers"), filepath.Join(s.runRoot, "overlay-containers")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFakeDB(t, s.dbPath, func(tx *bolt.Tx) error {
		for _, name := range []string{"id-registry", "name-registry", "ns-registry", "ctr", "all-ctrs", "pod", "allPods",
			"vol", "allVolumes", "exec", "runtime-config", "exit-code", "exit-code-time-stamp", "volume-ctrs"} {
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		cfg := tx.Bucket([]byte("runtime-config"))
		for k, v := range map[string]string{"static-dir": filepath.Dir(s.dbPath), "graph-root": s.graphRoot,
			"run-root": s.runRoot, "graph-driver-name": "", "os": "linux", "tmp-dir": "/run/libpod"} {
			if err := cfg.Put([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
	writeFile(t, filepath.Join(s.graphRoot, "overlay-containers", "containers.json"), "[]")
	return s
}

func writeFakeDB(t *testing.T, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// addFakeContainer stores a container in the fake database as libpod
// does: its bucket with the JSON config, and the registries.
func addFakeContainer(t *testing.T, s *podmanState, id, name string, labels map[string]string) {
	t.Helper()
	writeFakeDB(t, s.dbPath, func(tx *bolt.Tx) error {
		ctr, err := tx.Bucket([]byte("ctr")).CreateBucket([]byte(id))
		if err != nil {
			return err
		}
		var lb strings.Builder
		for k, v := range labels {
			if lb.Len() > 0 {
				lb.WriteString(",")
			}
			lb.WriteString(`"` + k + `":"` + v + `"`)
		}
		if err := ctr.Put([]byte("config"), []byte(`{"id":"`+id+`","name":"`+name+`","labels":{`+lb.String()+`}}`)); err != nil {
			return err
		}
		for bkt, kv := range map[string][2]string{"all-ctrs": {id, name}, "id-registry": {id, name}, "name-registry": {name, id}} {
			if err := tx.Bucket([]byte(bkt)).Put([]byte(kv[0]), []byte(kv[1])); err != nil {
				return err
			}
		}
		return nil
	})
}

func setExitCode(t *testing.T, s *podmanState, id, code string) {
	t.Helper()
	writeFakeDB(t, s.dbPath, func(tx *bolt.Tx) error { return tx.Bucket([]byte("exit-code")).Put([]byte(id), []byte(code)) })
}

var (
	fakeID    = strings.Repeat("c0", 32)
	fakeOther = strings.Repeat("d1", 32)
)

// TestStateSnapshot reads the exit status and every trace of a run's
// container from a database laid out like libpod's.
func TestStateSnapshot(t *testing.T) {
	s := fakeState(t)
	m := runMarks{id: fakeID, name: "agentnode-r1", runID: "r1", nonce: "n1"}
	snap, err := s.snapshot(m)
	if err != nil || snap.exited || len(snap.left) > 0 {
		t.Fatalf("empty database: %+v, %v", snap, err)
	}

	setExitCode(t, s, fakeID, "126")
	if snap, err = s.snapshot(m); err != nil || !snap.exited || snap.exitCode != 126 || len(snap.left) > 0 {
		t.Fatalf("exit code recorded: %+v, %v", snap, err)
	}

	// Each way the run's container can still be there is found.
	for _, c := range []struct {
		id, name string
		labels   map[string]string
		want     []string
	}{
		{fakeID, "other", nil, []string{"container " + fakeID + " in libpod's container list", "ID registry", "in libpod's database"}},
		{fakeOther, "agentnode-r1", nil, []string{"name registry", "a container named agentnode-r1"}},
		{fakeOther, "x", map[string]string{runLabel: "r1"}, []string{"labelled agentnode.run=r1"}},
		{fakeOther, "x", map[string]string{nonceLabel: "n1"}, []string{"this run's nonce"}},
	} {
		s := fakeState(t)
		setExitCode(t, s, fakeID, "0")
		addFakeContainer(t, s, c.id, c.name, c.labels)
		snap, err := s.snapshot(m)
		if err != nil || !snap.exited {
			t.Fatalf("%+v: %+v, %v", c, snap, err)
		}
		all := strings.Join(snap.left, "; ")
		for _, w := range c.want {
			if !strings.Contains(all, w) {
				t.Errorf("%+v: left %q lacks %q", c, all, w)
			}
		}
	}
	// A container of someone else is not the run's.
	s = fakeState(t)
	addFakeContainer(t, s, fakeOther, "someone-else", map[string]string{runLabel: "r2"})
	if snap, err := s.snapshot(m); err != nil || len(snap.left) > 0 {
		t.Errorf("someone else's container: %+v, %v", snap, err)
	}
}

// TestStateSnapshotRefusesTheUnexpected: whatever is not libpod's layout
// as this code knows it, or cannot be read in time, is an error (the run
// then asks podman), never an empty answer and never a crash.
func TestStateSnapshotRefusesTheUnexpected(t *testing.T) {
	m := runMarks{id: fakeID, name: "agentnode-r1", runID: "r1", nonce: "n1"}
	check := func(name string, s *podmanState) {
		t.Helper()
		snap, err := s.snapshot(m)
		if err == nil {
			t.Errorf("%s: snapshot = %+v, want an error", name, snap)
			return
		}
		t.Logf("%s: %v", name, err)
	}

	s := fakeState(t)
	writeFakeDB(t, s.dbPath, func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("exit-code")) })
	check("no exit-code bucket (podman < 4.2)", s)

	for _, key := range []string{"static-dir", "graph-root", "run-root", "graph-driver-name"} {
		s := fakeState(t)
		writeFakeDB(t, s.dbPath, func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("runtime-config")).Put([]byte(key), []byte("/elsewhere"))
		})
		check("runtime config "+key+" differs", s)
	}

	s = fakeState(t)
	setExitCode(t, s, fakeID, "zero")
	check("unparsable exit code", s)

	s = fakeState(t)
	writeFakeDB(t, s.dbPath, func(tx *bolt.Tx) error { return tx.Bucket([]byte("ctr")).Put([]byte(fakeOther), []byte("{}")) })
	check("a value in the containers bucket", s)

	s = fakeState(t)
	addFakeContainer(t, s, fakeOther, "x", nil)
	writeFakeDB(t, s.dbPath, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("ctr")).Bucket([]byte(fakeOther)).Put([]byte("config"), []byte("{not json"))
	})
	check("an unreadable container config", s)

	s = fakeState(t)
	s.dbPath = filepath.Join(t.TempDir(), "missing.db")
	check("no database", s)
	if _, err := os.Stat(s.dbPath); err == nil {
		t.Error("reading a missing database created it")
	}

	s = fakeState(t)
	writeFile(t, s.dbPath, "")
	check("empty file", s)

	s = fakeState(t)
	writeFile(t, s.dbPath, strings.Repeat("not a bolt database\n", 2000))
	check("garbage", s)

	// A page of the database overwritten: bbolt may fail or panic; either
	// way it is an error here.
	s = fakeState(t)
	for i := 0; i < 50; i++ {
		addFakeContainer(t, s, fmt.Sprintf("%064x", i), "c"+strings.Repeat("x", i), nil)
	}
	data, err := os.ReadFile(s.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	for i := 2 * 4096; i < len(data); i++ {
		data[i] = 0xff
	}
	writeFile(t, s.dbPath, string(data))
	if _, err := s.snapshot(m); err == nil {
		t.Error("damaged database read without an error")
	} else {
		t.Logf("damaged: %v", err)
	}
	// Whatever happened, podman is not kept waiting for the file.
	assertUnlocked(t, s.dbPath)
	if _, err := s.snapshot(m); err == nil {
		t.Error("damaged database read without an error the second time")
	}

	// A podman process holding the database: the read gives up after the
	// lock timeout instead of waiting for ever.
	s = fakeState(t)
	f, err := os.Open(s.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	check("locked by a writer", s)
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if _, err := s.snapshot(m); err != nil {
		t.Errorf("after the lock was released: %v", err)
	}
}

// TestStateReadNeverWrites: a read leaves libpod's database byte for byte
// as it was, and holds no lock afterwards.
func TestStateReadNeverWrites(t *testing.T) {
	s := fakeState(t)
	setExitCode(t, s, fakeID, "3")
	before, err := os.ReadFile(s.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(s.dbPath)
	for range 3 {
		if _, err := s.snapshot(runMarks{id: fakeID}); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := os.ReadFile(s.dbPath)
	fi2, _ := os.Stat(s.dbPath)
	if !bytes.Equal(before, after) || !fi.ModTime().Equal(fi2.ModTime()) {
		t.Error("the database changed")
	}
	assertUnlocked(t, s.dbPath)
}

// assertUnlocked checks that no one holds a lock on path (a podman writer
// could take it at once).
func assertUnlocked(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("%s is still locked: %v", path, err)
	}
}

// TestStorageLeftovers reads containers/storage's container lists, the
// volatile ones included, and refuses what it cannot read.
func TestStorageLeftovers(t *testing.T) {
	m := runMarks{id: fakeID, name: "agentnode-r1"}
	s := fakeState(t)
	if left, err := s.storageLeftovers(m); err != nil || len(left) > 0 {
		t.Fatalf("empty lists: %q, %v", left, err)
	}
	entry := func(id, name string) string { return `[{"id":"` + id + `","names":["` + name + `"],"layer":"l"}]` }
	for _, p := range []string{
		filepath.Join(s.graphRoot, "overlay-containers", "containers.json"),
		filepath.Join(s.graphRoot, "overlay-containers", "volatile-containers.json"),
		filepath.Join(s.runRoot, "overlay-containers", "volatile-containers.json"),
	} {
		for _, e := range []string{entry(fakeID, "x"), entry(fakeOther, "agentnode-r1")} {
			writeFile(t, p, e)
			left, err := s.storageLeftovers(m)
			if err != nil || len(left) != 1 || !strings.Contains(left[0], p) {
				t.Errorf("%s %s: %q, %v", p, e, left, err)
			}
		}
		writeFile(t, p, entry(fakeOther, "someone-else"))
		if left, err := s.storageLeftovers(m); err != nil || len(left) > 0 {
			t.Errorf("someone else's container: %q, %v", left, err)
		}
		writeFile(t, p, "{broken")
		if _, err := s.storageLeftovers(m); !errors.Is(err, errStateLayout) {
			t.Errorf("%s broken: %v", p, err)
		}
		writeFile(t, p, "[]")
	}
	if err := os.RemoveAll(filepath.Join(s.graphRoot, "overlay-containers")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.storageLeftovers(m); err == nil {
		t.Error("no container directory in the graph root: want an error")
	}
}

// --- against podman ---

// leaveContainer runs a container that exits but is kept (no --rm), with
// the name and labels a run of the backend would give it, and returns its
// ID.
func leaveContainer(t *testing.T, fx fixture, id, nonce string) string {
	t.Helper()
	out, err := podmanCLI("run", "--name", namePrefix+id, "--label", runLabel+"="+id, "--label", nonceLabel+"="+nonce,
		"--network", "none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
		strings.TrimPrefix(fx.Img.ConfigDigest, "sha256:"), "sh", "-c", "exit 7")
	if err == nil || !strings.Contains(err.Error(), "exit status 7") {
		t.Fatalf("podman run: %v %s", err, out)
	}
	cid, err := podmanCLI("container", "inspect", "--format", "{{.Id}}", namePrefix+id)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(cid)
}

// TestDirectProofDetectsLeftovers leaves a container behind deliberately:
// the proof from podman's state must refuse it, whichever of its marks is
// left, and accept once podman removed it.
func TestDirectProofDetectsLeftovers(t *testing.T) {
	b, fx := setup(t)
	e := b.eng
	if e.state == nil {
		t.Fatal("podman's state is not readable here: the direct proof is not in use")
	}
	id, nonce := newID(t, "left"), randomHex(16)
	cid := leaveContainer(t, fx, id, nonce)
	rs := &runState{e: e, req: &sandbox.RunRequest{Spec: sandbox.Spec{RunID: id}}, name: namePrefix + id, nonce: nonce, autoRemove: true}

	snap, err := e.state.snapshot(rs.marks(cid))
	if err != nil {
		t.Fatal(err)
	}
	if !snap.exited || snap.exitCode != 7 {
		t.Fatalf("libpod's recorded exit: %+v", snap)
	}
	err = b.verifyGoneDirect(rs, cid, snap)
	if err == nil {
		t.Fatal("a container left behind passed the proof")
	}
	for _, want := range []string{"libpod's container list", "ID registry", "name registry", "containers.json"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the proof did not see the container in %s: %v", want, err)
		}
	}
	// Each mark alone is enough (the ID unknown: another container's).
	other := strings.Repeat("f", 64)
	for _, m := range []runMarks{{id: other, name: rs.name}, {id: other, runID: id}, {id: other, nonce: nonce}} {
		snap, err := e.state.snapshot(m)
		if err != nil || len(snap.left) == 0 {
			t.Errorf("%+v: %+v, %v", m, snap, err)
		}
	}
	if left, err := e.state.storageLeftovers(runMarks{id: other, name: rs.name}); err != nil || len(left) == 0 {
		t.Errorf("storage by name: %q, %v", left, err)
	}

	if _, err := podmanCLI("rm", "--force", "--time", "0", cid); err != nil {
		t.Fatal(err)
	}
	snap, err = e.state.snapshot(rs.marks(cid))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.verifyGoneDirect(rs, cid, snap); err != nil {
		t.Fatalf("after podman rm: %v", err)
	}
}

// podmanCalls replaces b's podman binary with a wrapper that logs each
// call's arguments and returns the log's path.
func podmanCalls(t *testing.T, b *backend) string {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	wrapper := filepath.Join(dir, "podman")
	writeScript(t, wrapper, `echo "$*" >>`+log+`; exec `+b.eng.podman+` "$@"`)
	b.eng.podman = wrapper
	return log
}

func readCalls(t *testing.T, log string) []string {
	t.Helper()
	data, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.FieldsFunc(string(data), func(r rune) bool { return r == '\n' })
}

// TestRunCallsPodmanOnce: a run that ends by itself costs one podman call,
// podman run --rm; its exit status and the proof come from podman's state.
func TestRunCallsPodmanOnce(t *testing.T) {
	b, fx := setup(t)
	log := podmanCalls(t, b)
	for _, code := range []string{"0", "3", "125", "126", "127"} {
		id := newID(t, "once")
		resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: spec(fx, id, "sh", "-c", "exit "+code)})
		if err != nil || !resp.CleanupVerified || resp.ExitCode != atoi(code) {
			t.Fatalf("exit %s: %+v, %v", code, resp, err)
		}
		assertGone(t, b, id)
	}
	calls := readCalls(t, log)
	if len(calls) != 5 {
		t.Fatalf("podman calls: %q", calls)
	}
	for _, c := range calls {
		if !strings.Contains(c, " run --rm=true ") {
			t.Errorf("call %q", c)
		}
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// TestDirectProofFallsBack: when libpod's database cannot be read, or is
// not podman's live one (it has no exit status of the run's container),
// runs still end with their containers removed and proven gone, through
// podman; an exit status the database cannot confirm is an error, never a
// guess.
func TestDirectProofFallsBack(t *testing.T) {
	b, fx := setup(t)
	log := podmanCalls(t, b)
	real := b.eng.state

	run := func(argv ...string) (*sandbox.RunResponse, error) {
		t.Helper()
		id := newID(t, "fallback")
		resp, err := b.Run(t.Context(), &sandbox.RunRequest{Spec: spec(fx, id, argv...)})
		assertGone(t, b, id)
		if err != nil && strings.Contains(err.Error(), "cleanup") {
			t.Errorf("cleanup not verified: %v", err)
		}
		return resp, err
	}
	proofByPodman := func(name string) {
		t.Helper()
		calls := strings.Join(readCalls(t, log), "\n")
		if !strings.Contains(calls, "rm --force") || !strings.Contains(calls, "ps --all --external") {
			t.Errorf("%s: the removal was not proven through podman: %q", name, calls)
		}
		_ = os.Remove(log)
	}

	// Unreadable: podman's status is the tool's outside 125-127 (as
	// podman documents), and 125-127 cannot be told apart.
	garbage := filepath.Join(t.TempDir(), "bolt_state.db")
	writeFile(t, garbage, strings.Repeat("garbage\n", 1000))
	b.eng.state = &podmanState{dbPath: garbage, lockTimeout: real.lockTimeout, graphRoot: real.graphRoot, runRoot: real.runRoot, graphDriver: real.graphDriver}
	if resp, err := run("sh", "-c", "exit 3"); err != nil || resp.ExitCode != 3 || !resp.CleanupVerified {
		t.Errorf("unreadable database, exit 3: %+v, %v", resp, err)
	}
	proofByPodman("unreadable, exit 3")
	if resp, err := run("sh", "-c", "exit 126"); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Errorf("unreadable database, exit 126: %+v, %v; want an error", resp, err)
	}
	proofByPodman("unreadable, exit 126")

	// Readable, but not the live database: no exit status of the run's
	// container is in it, so neither the status nor the removal is
	// taken from it.
	stale := fakeState(t)
	stale.graphRoot, stale.runRoot, stale.graphDriver = real.graphRoot, real.runRoot, real.graphDriver
	writeFakeDB(t, stale.dbPath, func(tx *bolt.Tx) error {
		cfg := tx.Bucket([]byte("runtime-config"))
		if err := cfg.Put([]byte("graph-root"), []byte(real.graphRoot)); err != nil {
			return err
		}
		return cfg.Put([]byte("run-root"), []byte(real.runRoot))
	})
	b.eng.state = stale
	if resp, err := run("sh", "-c", "exit 3"); err == nil || !strings.Contains(err.Error(), "no exit status") {
		t.Errorf("stale database, exit 3: %+v, %v; want an error", resp, err)
	}
	proofByPodman("stale, exit 3")

	// No state reader at all (another database backend): containers are
	// kept, inspected and removed through podman, as before.
	b.eng.state = nil
	for _, code := range []string{"0", "3", "125", "126", "127"} {
		if resp, err := run("sh", "-c", "exit "+code); err != nil || resp.ExitCode != atoi(code) || !resp.CleanupVerified {
			t.Errorf("without a state reader, exit %s: %+v, %v", code, resp, err)
		}
		proofByPodman("without a state reader, exit " + code)
	}
	for _, argv0 := range []string{"/no/such/tool", "/pack/hello.txt"} {
		if resp, err := run(argv0); err == nil {
			t.Errorf("without a state reader, %s: %+v; want an error", argv0, resp)
		}
	}
	b.eng.state = real
}

// TestRecordedExit: a --rm run's exit status is the one libpod recorded,
// and podman's must agree; what cannot be told is an error.
func TestRecordedExit(t *testing.T) {
	pipes := &stdio{tail: &tailWriter{w: io.Discard}}
	_, _ = pipes.tail.Write([]byte("Error: podman's own message"))
	unreadable := errors.New("unreadable")
	for _, c := range []struct {
		name     string
		cid      string
		snap     *dbSnapshot
		snapErr  error
		code     int
		timedOut bool
		want     int
		wantErr  string // "" for success
	}{
		{"recorded 0", fakeID, &dbSnapshot{exited: true, exitCode: 0}, nil, 0, false, 0, ""},
		{"recorded 3", fakeID, &dbSnapshot{exited: true, exitCode: 3}, nil, 3, false, 3, ""},
		{"the tool exited 125", fakeID, &dbSnapshot{exited: true, exitCode: 125}, nil, 125, false, 125, ""},
		{"the tool exited 127", fakeID, &dbSnapshot{exited: true, exitCode: 127}, nil, 127, false, 127, ""},
		{"the tool exited 255", fakeID, &dbSnapshot{exited: true, exitCode: 255}, nil, 255, false, 255, ""},
		{"podman could not start it", fakeID, &dbSnapshot{}, nil, 127, false, 0, "did not run to an exit"},
		{"podman's stderr is in the error", fakeID, &dbSnapshot{}, nil, 125, false, 0, "podman's own message"},
		{"podman says 0, nothing recorded", fakeID, &dbSnapshot{}, nil, 0, false, 0, "did not run to an exit"},
		{"podman failed after the tool exited 0", fakeID, &dbSnapshot{exited: true, exitCode: 0}, nil, 125, false, 0, "recorded exit status 0"},
		{"podman says 0, the tool exited 1", fakeID, &dbSnapshot{exited: true, exitCode: 1}, nil, 0, false, 0, "recorded exit status 1"},
		{"conmon's backstop (-1)", fakeID, &dbSnapshot{exited: true, exitCode: -1}, nil, 255, false, 0, "no exit status of the tool"},
		{"no cidfile", "", nil, nil, 125, false, 0, "before it created the container"},
		{"no cidfile, status 0", "", nil, nil, 0, false, 0, "before it created the container"},
		{"unreadable, outside 125-127", fakeID, nil, unreadable, 3, false, 3, ""},
		{"unreadable, 126", fakeID, nil, unreadable, 126, false, 0, "unknown"},
		{"timed out, killed", fakeID, &dbSnapshot{}, nil, 137, true, 137, ""},
		{"timed out, podman failed", fakeID, &dbSnapshot{}, nil, 125, true, 0, "did not run to an exit"},
		{"timed out, the tool exited 126", fakeID, &dbSnapshot{exited: true, exitCode: 126}, nil, 126, true, 126, ""},
	} {
		rs := &runState{log: testLogger(), autoRemove: true, snap: c.snap, snapErr: c.snapErr}
		got, err := rs.recordedExit(c.cid, c.code, c.timedOut, pipes)
		switch {
		case c.wantErr == "" && (err != nil || got != c.want):
			t.Errorf("%s: %d, %v; want %d", c.name, got, err, c.want)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: %d, %v; want an error with %q", c.name, got, err, c.wantErr)
		}
	}
}
