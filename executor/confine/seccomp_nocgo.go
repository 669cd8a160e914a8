//go:build !cgo

package confine

import (
	"errors"

	"golang.org/x/sys/unix"
)

// compileFilter needs libseccomp, which needs cgo: a build without it
// cannot confine, so every confined run is refused.
func compileFilter(bool) ([]unix.SockFilter, error) {
	return nil, errors.New("seccomp: agentnode was built without cgo (libseccomp); host tools cannot be confined")
}
