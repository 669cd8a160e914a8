//go:build !unix

package store

// lock is a no-op where flock is not available: concurrent installs are
// not serialised there.
func lock(string) (func(), error) { return func() {}, nil }
