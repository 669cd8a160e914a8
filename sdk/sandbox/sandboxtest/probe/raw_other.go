//go:build !amd64

package main

// The raw fork helpers exist only for amd64 (the profile's seccomp filter is
// x86_64-only); elsewhere the checks that need them report that they could
// not run, which fails them.

const rawSupported = false

const enosys = 38

func rawClone(uintptr) int64           { return -enosys }
func rawClone3(uintptr, uintptr) int64 { return -enosys }
func forkUnshare(uintptr) int64        { return -enosys }
func forkPause() int64                 { return -enosys }
func forkInt80() int64                 { return -enosys }
func forkX32() int64                   { return -enosys }
func forkFault() int64                 { return -enosys }
