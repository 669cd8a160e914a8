package main

// Implemented in raw_amd64.s. Each returns the child's pid or -errno.

func rawClone(flags uintptr) (ret int64)
func rawClone3(args uintptr, size uintptr) (ret int64)
func forkUnshare(flags uintptr) (ret int64)
func forkPause() (ret int64)
func forkInt80() (ret int64)
func forkX32() (ret int64)
func forkFault() (ret int64)

const rawSupported = true
