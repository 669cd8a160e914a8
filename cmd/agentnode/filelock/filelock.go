//go:build unix

// Package filelock serialises agentnode processes that change the same
// on-disk state (the package store, the image layout) with an exclusive
// advisory flock on a lock file.
package filelock

import (
	"os"
	"syscall"
)

// Lock takes an exclusive advisory lock on name (created 0600 if needed),
// waiting for other holders, and returns its release.
func Lock(name string) (release func(), err error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
