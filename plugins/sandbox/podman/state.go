package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Every podman call costs tens of milliseconds of podman's own start-up,
// which is most of what a trivial run costs. So a run lets podman remove
// its container (--rm) and proves the removal by reading podman's state
// itself, read-only: libpod's database (the containers libpod knows, and
// the exit status it recorded for each container that ran) and
// containers/storage's container lists, the two sources `podman ps --all
// --external` reads. Anything unexpected (another database backend, a
// layout this code does not know, a file that cannot be read or is locked
// for too long) makes the run fall back to asking podman (`podman rm`,
// `podman ps`), never to assuming the container is gone.

// The layout of libpod's BoltDB database (libpod/boltdb_state*.go; podman
// 4.2 added the exit-code buckets, 4.3 is what is tested). Each container is
// a bucket <ctr>/<id> with its JSON config under "config"; the registries
// map IDs and names of containers (and pods) to each other; the exit-code
// bucket maps a container ID to the decimal exit status libpod read from
// conmon's exit file, and it is kept after the container is removed
// (pruned five minutes after the exit), because that is where `podman run
// --rm` itself takes its exit status from.
var (
	dbCtrBkt           = []byte("ctr")
	dbAllCtrsBkt       = []byte("all-ctrs")
	dbIDRegistryBkt    = []byte("id-registry")
	dbNameRegistryBkt  = []byte("name-registry")
	dbExitCodeBkt      = []byte("exit-code")
	dbRuntimeConfigBkt = []byte("runtime-config")
	dbConfigKey        = []byte("config")
)

// stateLockTimeout bounds the wait for libpod's database while a podman
// process holds it (podman holds it for one operation at a time).
const stateLockTimeout = 2 * time.Second

// podmanState reads podman's state directly. Its configuration is fixed
// once the probe made it; only broken changes, once.
type podmanState struct {
	dbPath      string // <static dir>/bolt_state.db
	lockTimeout time.Duration
	graphRoot   string
	runRoot     string
	graphDriver string

	// broken is set when bbolt faulted or panicked on the database: its
	// memory map cannot be released safely, and a second attempt would
	// fare no better. Every later read fails at once (and falls back).
	broken atomic.Pointer[error]
}

// newPodmanState returns a reader of the state of the podman the probe
// found, or why there is none: the database must be the BoltDB one (the
// only backend before podman 4.5, which reports the backend in `podman
// info`), at the default static directory of a root podman, with the
// buckets this code reads and a runtime configuration naming the same
// storage.
func newPodmanState(e *engine, dbBackend string) (*podmanState, error) {
	if dbBackend != "" && dbBackend != "boltdb" {
		return nil, fmt.Errorf("podman uses the %q database backend, not boltdb", dbBackend)
	}
	s := &podmanState{
		dbPath:      filepath.Join(e.graphRoot, "libpod", "bolt_state.db"),
		lockTimeout: stateLockTimeout,
		graphRoot:   e.graphRoot,
		runRoot:     e.runRoot,
		graphDriver: e.graphDriver,
	}
	// A container ID that cannot exist: this checks the layout only.
	if _, err := s.snapshot(runMarks{id: "probe"}); err != nil {
		return nil, err
	}
	if _, err := s.storageLeftovers(runMarks{id: "probe"}); err != nil {
		return nil, err
	}
	return s, nil
}

// runMarks is what identifies a run's container in podman's state.
type runMarks struct {
	id    string // container ID; "" when podman never wrote it
	name  string
	runID string
	nonce string
}

// dbSnapshot is what one read transaction of libpod's database says about
// a run.
type dbSnapshot struct {
	// exited: libpod recorded an exit status for the container, exitCode.
	// Only a container that ran has one, and only podman's live database
	// can hold the exit of a container created moments ago with a random
	// ID: it also proves that this file is the database podman uses.
	exited   bool
	exitCode int
	// left lists the run's container where it is still in the database:
	// by ID, by name, or a container carrying the run's labels.
	left []string
}

// errStateLayout marks a database or container list that is not what this
// code knows how to read.
var errStateLayout = errors.New("unexpected layout")

// snapshot reads what libpod's database says about the run m in one
// read-only transaction.
func (s *podmanState) snapshot(m runMarks) (*dbSnapshot, error) {
	snap := &dbSnapshot{}
	err := s.view(func(tx *bolt.Tx) error {
		bkts := map[string]*bolt.Bucket{}
		for _, name := range [][]byte{dbCtrBkt, dbAllCtrsBkt, dbIDRegistryBkt, dbNameRegistryBkt, dbExitCodeBkt, dbRuntimeConfigBkt} {
			b := tx.Bucket(name)
			if b == nil {
				return fmt.Errorf("%w: no bucket %q", errStateLayout, name)
			}
			bkts[string(name)] = b
		}
		if err := s.checkRuntimeConfig(bkts[string(dbRuntimeConfigBkt)]); err != nil {
			return err
		}
		if m.id != "" {
			if v := bkts[string(dbExitCodeBkt)].Get([]byte(m.id)); v != nil {
				code, err := strconv.Atoi(string(v))
				if err != nil {
					return fmt.Errorf("%w: exit code %q of container %s", errStateLayout, v, m.id)
				}
				snap.exited, snap.exitCode = true, code
			}
			if bkts[string(dbAllCtrsBkt)].Get([]byte(m.id)) != nil {
				snap.left = append(snap.left, "container "+m.id+" in libpod's container list")
			}
			if bkts[string(dbIDRegistryBkt)].Get([]byte(m.id)) != nil {
				snap.left = append(snap.left, "container ID "+m.id+" in libpod's ID registry")
			}
		}
		if m.name != "" {
			if v := bkts[string(dbNameRegistryBkt)].Get([]byte(m.name)); v != nil {
				snap.left = append(snap.left, fmt.Sprintf("the name %s in libpod's name registry (%s)", m.name, v))
			}
		}
		// Every container's config, as `podman ps` would list it.
		return bkts[string(dbCtrBkt)].ForEach(func(k, v []byte) error {
			ctr := bkts[string(dbCtrBkt)].Bucket(k)
			if v != nil || ctr == nil {
				return fmt.Errorf("%w: %q in the containers bucket is not a bucket", errStateLayout, k)
			}
			raw := ctr.Get(dbConfigKey)
			var cfg struct {
				ID     string            `json:"id"`
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			}
			if raw == nil || json.Unmarshal(raw, &cfg) != nil || cfg.ID != string(k) {
				return fmt.Errorf("%w: container %q has no readable config", errStateLayout, k)
			}
			switch {
			case m.id != "" && cfg.ID == m.id:
				snap.left = append(snap.left, "container "+cfg.ID+" in libpod's database")
			case m.name != "" && cfg.Name == m.name:
				snap.left = append(snap.left, fmt.Sprintf("a container named %s (%s) in libpod's database", m.name, cfg.ID))
			case m.runID != "" && cfg.Labels[runLabel] == m.runID:
				snap.left = append(snap.left, fmt.Sprintf("a container labelled %s=%s (%s) in libpod's database", runLabel, m.runID, cfg.ID))
			case m.nonce != "" && cfg.Labels[nonceLabel] == m.nonce:
				snap.left = append(snap.left, fmt.Sprintf("a container with this run's nonce (%s) in libpod's database", cfg.ID))
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("libpod's database %s: %w", s.dbPath, err)
	}
	return snap, nil
}

// checkRuntimeConfig checks that the database belongs to this static
// directory and to the storage podman reported: libpod refuses to use a
// database whose recorded configuration differs, so a database that passes
// is one podman with this configuration would use. (A copy left elsewhere
// would fail the static directory.) An empty graph driver is libpod's
// "storage's default".
func (s *podmanState) checkRuntimeConfig(b *bolt.Bucket) error {
	for _, c := range []struct {
		key  string
		want []string
	}{
		{"static-dir", []string{filepath.Dir(s.dbPath)}},
		{"graph-root", []string{s.graphRoot}},
		{"run-root", []string{s.runRoot}},
		{"graph-driver-name", []string{"", s.graphDriver}},
	} {
		v := b.Get([]byte(c.key))
		if v == nil || !contains(c.want, string(v)) {
			return fmt.Errorf("%w: runtime config %s is %q, want %q", errStateLayout, c.key, v, c.want)
		}
	}
	return nil
}

// view runs fn in a read transaction of libpod's database, opened
// read-only (bbolt then takes a shared lock, which podman's writers wait
// for: fn must be quick). A database bbolt faults or panics on is an error,
// never a crash; its file is closed at once so that its lock never blocks
// podman, and the state reader is marked broken.
func (s *podmanState) view(fn func(*bolt.Tx) error) (err error) {
	if p := s.broken.Load(); p != nil {
		return *p
	}
	var opened []*os.File
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("reading it failed: %v", p)
			s.broken.Store(&err)
			for _, f := range opened {
				_ = f.Close()
			}
		}
	}()
	openFile := func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := openStateFile(name, flag)
		if f != nil {
			opened = append(opened, f)
		}
		return f, err
	}
	db, err := bolt.Open(s.dbPath, 0, &bolt.Options{ReadOnly: true, Timeout: s.lockTimeout, OpenFile: openFile})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(fn)
}

// openStateFile is bbolt's OpenFile for libpod's database: read-only, never
// created, and only a non-empty regular file (bbolt would try to initialise
// an empty one).
func openStateFile(name string, flag int) (*os.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC) != 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("libpod's database is only ever read")}
	}
	f, err := os.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%w: %s is not a regular file (%s)", errStateLayout, name, fi.Mode().Type())
	case fi.Size() == 0:
		err = fmt.Errorf("%w: %s is empty", errStateLayout, name)
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// storageLeftovers lists the run's container where containers/storage
// still has it: an entry with its ID or name in one of the container
// lists. Storage keeps containers.json in <graph root>/<driver>-containers
// and, since containers/storage 1.45 (podman 4.4), volatile containers in
// volatile-containers.json there or, with a transient store, under the run
// root; every one of these that exists is read (a stale extra file can
// only make the proof fail, never pass). The lists are replaced by rename,
// so each read is one consistent version.
func (s *podmanState) storageLeftovers(m runMarks) ([]string, error) {
	graphDir := filepath.Join(s.graphRoot, s.graphDriver+"-containers")
	if fi, err := os.Stat(graphDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: containers/storage's container directory %s: %v", errStateLayout, graphDir, err)
	}
	var left []string
	for _, dir := range []string{graphDir, filepath.Join(s.runRoot, s.graphDriver+"-containers")} {
		for _, file := range []string{"containers.json", "volatile-containers.json"} {
			p := filepath.Join(dir, file)
			data, err := os.ReadFile(p)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("containers/storage: %w", err)
			}
			var list []struct {
				ID    string   `json:"id"`
				Names []string `json:"names"`
			}
			if len(data) > 0 {
				if err := json.Unmarshal(data, &list); err != nil {
					return nil, fmt.Errorf("%w: containers/storage's %s: %v", errStateLayout, p, err)
				}
			}
			for _, c := range list {
				switch {
				case m.id != "" && c.ID == m.id:
					left = append(left, fmt.Sprintf("container %s in %s", c.ID, p))
				case m.name != "" && contains(c.Names, m.name):
					left = append(left, fmt.Sprintf("a container named %s (%s) in %s", m.name, c.ID, p))
				}
			}
		}
	}
	return left, nil
}
