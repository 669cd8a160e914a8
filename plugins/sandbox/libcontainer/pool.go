package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/sdk/sandbox"
	"github.com/agentnode/agentnode/sdk/sandbox/imagestore"
	"github.com/agentnode/agentnode/sdk/sandbox/stdiopipe"
)

// The warm pool. A long-lived host (`agentnode mcp serve`) lets this
// plugin keep containers ready for its next runs (sandbox.Spec.Warm).
// After such a run the plugin prepares up to Warm.Size containers for the
// same spec: each is created like a cold run's (config, user namespace on
// a slot of ids of its own, the run's own root, cgroup) and started up to
// the point where runc's init has set up every namespace, mount, cgroup
// limit and rlimit and waits to exec the tool (libcontainer's
// Container.Start; the seccomp filter is loaded just before that exec).
// Its stdio pipes are made then too (stdiopipe.NewDeferred).
//
// A run whose spec equals a prepared container's in every field but RunID,
// Timeout and Warm takes it: its streams are attached, the reaper armed
// with its deadline, and the init let exec the tool (Container.Exec).
// From there it is a run like any other, and its container is destroyed
// and the removal proven after it; a container serves one run at most. A
// run whose spec matches none is made cold, as always.
//
// A prepared container is destroyed after Warm.Idle unused, when the pool
// makes room for another spec's (the pool holds at most Warm.Size in all),
// and when the plugin shuts down (closePool). Should the plugin die, the
// reaper (armed without a deadline while the container waits) destroys it
// at once, and orphans.go finds what is left by its owner label, as for
// any run. Prepared containers have ids of their own (warmPrefix...): the
// host's run id is not known when they are made.

// A prepared container mounted its host paths (the package, the image's
// rootfs, the workspace, the egress socket) when it was prepared: a bind
// mount holds the directory it found, not the path. `agentnode install`
// replaces a package by renaming a new directory into place, so a run
// takes a prepared container only while every path still names the file
// it mounted (hostIDs); the host has just verified what the path names.
// Otherwise the container is destroyed and the run made cold.

// fileID is a file's identity: device and inode.
type fileID struct{ dev, ino uint64 }

// hostIDs identifies the host paths spec's container mounts.
func hostIDs(spec sandbox.Spec) ([]fileID, error) {
	rootfs, err := imagestore.RootfsDir(spec.ImageStore, spec.Image)
	if err != nil {
		return nil, err
	}
	paths := []string{rootfs, spec.PackageDir}
	if spec.Workspace != nil {
		paths = append(paths, spec.Workspace.Path)
	}
	if spec.EgressSocket != "" {
		paths = append(paths, spec.EgressSocket)
	}
	ids := make([]fileID, len(paths))
	for i, p := range paths {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		ids[i] = fileID{dev: st.Dev, ino: st.Ino}
	}
	return ids, nil
}

// warmPrefix starts the id of every prepared container.
const warmPrefix = "an-warm-"

// warmPool holds the prepared containers, oldest first. The zero value is
// an empty pool.
type warmPool struct {
	mu      sync.Mutex
	entries []*warmEntry
	closed  bool
	// bg counts discards under way (closePool waits for them).
	bg sync.WaitGroup
	// hits counts runs served by a prepared container.
	hits atomic.Int64
}

// warmEntry is one prepared container, or one being prepared.
type warmEntry struct {
	key   string
	ready chan struct{} // closed once box is set (nil: preparing failed)
	box   *box
	idle  *time.Timer // destroys it unused; set once ready, under mu
}

// warmKey is what a run's spec must equal to take a prepared container:
// every field but RunID, Timeout and Warm.
func warmKey(spec sandbox.Spec) string {
	spec.RunID, spec.Timeout, spec.Warm = "", 0, sandbox.WarmPool{}
	raw, err := json.Marshal(spec)
	if err != nil {
		// Every field marshals; should one ever not, nothing matches.
		return ""
	}
	return string(raw)
}

// remove takes e out of the pool; false when it is no longer there (a run
// took it, or it was already discarded). Call with mu held.
func (p *warmPool) remove(e *warmEntry) bool {
	i := slices.Index(p.entries, e)
	if i < 0 {
		return false
	}
	p.entries = slices.Delete(p.entries, i, i+1)
	if e.idle != nil {
		e.idle.Stop()
	}
	return true
}

// take returns a container prepared for spec, waiting for one still being
// prepared, or nil when there is none (the run is made cold).
func (p *warmPool) take(ctx context.Context, b *backend, spec sandbox.Spec) *box {
	key := warmKey(spec)
	if key == "" {
		return nil
	}
	p.mu.Lock()
	var e *warmEntry
	for _, c := range p.entries {
		if c.key == key {
			e = c
			break
		}
	}
	if e != nil {
		p.remove(e)
		p.bg.Add(1) // until it is handed over or discarded
	}
	p.mu.Unlock()
	if e == nil {
		return nil
	}
	select {
	case <-e.ready:
		if e.box == nil {
			p.bg.Done()
			return nil
		}
		if ids, err := hostIDs(spec); err != nil || !slices.Equal(ids, e.box.mounted) {
			// A path now names another file than the one mounted.
			go func() { defer p.bg.Done(); b.discard(e.box) }()
			return nil
		}
		p.bg.Done()
		p.hits.Add(1)
		return e.box
	case <-ctx.Done():
		go func() {
			defer p.bg.Done()
			<-e.ready
			b.discard(e.box)
		}()
		return nil
	}
}

// fill prepares containers for spec in the background until the pool
// holds spec.Warm.Size for it, making room by discarding ready
// containers prepared for other specs, oldest first.
func (p *warmPool) fill(b *backend, spec sandbox.Spec) {
	size, idle := spec.Warm.Size, spec.Warm.Idle
	key := warmKey(spec)
	// A sealed egress socket is made per run: no later run would match.
	if size <= 0 || idle <= 0 || key == "" || spec.EgressSocket != "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	need := size
	for _, e := range p.entries {
		if e.key == key {
			need--
		}
	}
	for i := 0; need > 0 && len(p.entries)+need > size && i < len(p.entries); {
		e := p.entries[i]
		select {
		case <-e.ready:
			if e.key != key {
				p.remove(e)
				p.bg.Add(1)
				go func() { defer p.bg.Done(); b.discard(e.box) }()
				continue
			}
		default:
		}
		i++
	}
	need = min(need, size-len(p.entries))
	if need <= 0 {
		return
	}
	fresh := make([]*warmEntry, need)
	for i := range fresh {
		fresh[i] = &warmEntry{key: key, ready: make(chan struct{})}
	}
	p.entries = append(p.entries, fresh...)
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		// One at a time: a pool is meant to cost little.
		for _, e := range fresh {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			var x *box
			var err error
			if !closed {
				x, err = b.prepare(spec)
			}
			if err != nil {
				b.log.Warn("preparing a warm container", "error", err)
			}
			p.mu.Lock()
			e.box = x
			close(e.ready)
			switch {
			case x == nil:
				p.remove(e)
			case !slices.Contains(p.entries, e):
				// Taken while it was prepared: the taker has it now.
			default:
				e.idle = time.AfterFunc(idle, func() {
					p.mu.Lock()
					gone := p.remove(e)
					if gone {
						p.bg.Add(1)
					}
					p.mu.Unlock()
					if gone {
						defer p.bg.Done()
						b.discard(e.box)
					}
				})
			}
			p.mu.Unlock()
		}
	}()
}

// closePool destroys every prepared container and waits until every
// discard is done; nothing is prepared after it. The plugin calls it when
// the host stops it.
func (p *warmPool) closePool(b *backend) {
	p.mu.Lock()
	p.closed = true
	entries := p.entries
	p.entries = nil
	for _, e := range entries {
		if e.idle != nil {
			e.idle.Stop()
		}
	}
	p.mu.Unlock()
	for _, e := range entries {
		<-e.ready
		b.discard(e.box)
	}
	p.bg.Wait()
}

// prepare makes a container for spec and starts it up to the exec of the
// tool, under an id of its own.
func (b *backend) prepare(spec sandbox.Spec) (*box, error) {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return nil, err
	}
	id := warmPrefix + hex.EncodeToString(r[:])
	before, err := hostIDs(spec)
	if err != nil {
		return nil, fmt.Errorf("libcontainer: preparing %s: %w", id, err)
	}
	x, err := b.createBox(id, spec)
	if err != nil {
		return nil, fmt.Errorf("libcontainer: preparing %s: %w", id, err)
	}
	pipes, err := stdiopipe.NewDeferred()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("libcontainer: preparing %s: %w", id, err), b.teardown(x, nil))
	}
	attachStdio(pipes, x.proc)
	// No deadline while it waits: a run's Arm replaces this one.
	armed, err := b.reaper.Arm(reapTarget{StateRoot: b.stateRoot, CgroupParent: b.cgroupParent, ID: id, Owner: b.owner}, 0)
	if err != nil {
		pipes.Abort()
		return nil, errors.Join(fmt.Errorf("libcontainer: preparing %s: %w", id, err), b.teardown(x, nil))
	}
	if err := x.container.Start(x.proc); err != nil {
		pipes.Abort()
		return nil, errors.Join(fmt.Errorf("libcontainer: starting %s: %w", id, err), b.teardown(x, armed))
	}
	x.pipes, x.armed = pipes, armed
	// What was mounted is what the paths named before and still name.
	if after, err := hostIDs(spec); err != nil || !slices.Equal(before, after) {
		b.discard(x)
		return nil, fmt.Errorf("libcontainer: preparing %s: a mounted path changed meanwhile (%v)", id, err)
	}
	x.mounted = before
	return x, nil
}

// discard destroys a prepared container no run took. Nil is nothing.
func (b *backend) discard(x *box) {
	if x == nil {
		return
	}
	if err := x.container.Signal(unix.SIGKILL); err != nil && !errors.Is(err, libcontainer.ErrNotRunning) {
		b.log.Warn("killing a warm container", "id", x.id, "error", err)
	}
	_, _ = x.proc.Wait()
	if err := b.teardown(x, x.armed); err != nil {
		b.log.Error("warm container cleanup not verified", "id", x.id, "error", err)
	}
	x.pipes.Abort()
}
