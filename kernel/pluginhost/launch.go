package pluginhost

import (
	"runtime"
	"sync"
)

// Plugins are started with Pdeathsig (SIGKILL), so they die with the host
// even when the host is killed with SIGKILL. Linux delivers that signal when
// the *thread* that forked the child exits, not the process. Go threads
// normally live as long as the process, with one exception: a goroutine that
// exits while locked to its thread (runtime.LockOSThread) takes the thread
// down with it. Any goroutine may lock the thread it happens to run on, so
// forking from an arbitrary goroutine lets unrelated code, now or later,
// kill our plugins by accident.
//
// Every plugin is therefore forked on a launcher goroutine that locks its
// thread and never unlocks or returns: the thread is ours alone and lives
// until the process dies, which is exactly when Pdeathsig should fire. The
// whole go-plugin Client.Start runs there, because the fork happens inside
// it. A few launchers run in parallel so that one slow handshake does not
// hold up other launches; their threads are kept for the life of the process.
const maxLaunchers = 4

var launchers struct {
	mu    sync.Mutex
	idle  int
	total int
	work  chan func()
}

func init() { launchers.work = make(chan func()) }

// onLaunchThread runs f on a launcher thread and waits for it. A panic in f
// is re-raised in the caller; the launcher thread survives it.
func onLaunchThread(f func()) {
	var (
		done     = make(chan struct{})
		panicked any
	)
	job := func() {
		defer close(done)
		defer func() { panicked = recover() }()
		f()
	}
	launchers.mu.Lock()
	if launchers.idle == 0 && launchers.total < maxLaunchers {
		launchers.total++
		launchers.idle++
		go launchLoop()
	}
	launchers.mu.Unlock()
	launchers.work <- job
	<-done
	if panicked != nil {
		panic(panicked)
	}
}

func launchLoop() {
	// Never unlocked, and the loop never ends: see the comment above.
	runtime.LockOSThread()
	for job := range launchers.work {
		launchers.mu.Lock()
		launchers.idle--
		launchers.mu.Unlock()
		job()
		launchers.mu.Lock()
		launchers.idle++
		launchers.mu.Unlock()
	}
}
