//go:build unix

package filelock

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func TestLockExcludes(t *testing.T) {
	name := filepath.Join(t.TempDir(), "x.lock")
	release, err := Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Bool
	done := make(chan struct{})
	go func() {
		// A second open file description: flock excludes it like another process.
		r2, err := Lock(name)
		if err == nil {
			got.Store(true)
			r2()
		}
		close(done)
	}()
	time.Sleep(100 * time.Millisecond)
	if got.Load() {
		t.Fatal("second Lock succeeded while the first was held")
	}
	release()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("second Lock did not get the lock after release")
	}
	if !got.Load() {
		t.Fatal("second Lock failed")
	}
}
