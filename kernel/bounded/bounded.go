// Package bounded is agentnode's one implementation of reading
// attacker-controlled files and documents within bounds, before a decoder
// that recurses or buffers without limit ever sees them.
//
//   - JSONDepth and YAML measure the nesting of a document with an
//     iterative scan and refuse one nested deeper than a limit: goccy/go-yaml
//     and the JSON Schema compiler recurse once per level, so a few hundred
//     kilobytes nested 100,000 deep cost them minutes and gigabytes.
//   - ReadFile and Open open a file without blocking (O_NONBLOCK: a FIFO
//     would block the open until a writer comes) and check with fstat that
//     what was opened is a regular file, before reading at most a limit.
//
// The limits themselves belong to the callers (manifest, config, tool
// input); they are documented in specs/manifest.md, specs/config.md and
// specs/toolio.md.
//
// It is in the trusted core because the kernel reads attacker-controlled
// documents (manifests, lockfiles, config, plugin answers) before it decides.
package bounded

import (
	"errors"
	"fmt"
)

// Errors. Every error of this package wraps one of them (or, for a file
// that cannot be opened, the *fs.PathError of the open).
var (
	// ErrTooDeep: a document is nested deeper than the limit.
	ErrTooDeep = errors.New("nested too deeply")
	// ErrTooLarge: a file or document is larger than the limit.
	ErrTooLarge = errors.New("too large")
	// ErrNotRegular: a file is a FIFO, a device, a socket, a directory or
	// (where symlinks are not followed) a symlink.
	ErrNotRegular = errors.New("not a regular file")
)

// DepthError is a document nested deeper than Max levels. Line (YAML,
// from 1) or Offset (JSON, in bytes) says where the limit was crossed.
type DepthError struct {
	Max    int
	Line   int
	Offset int64
}

func (e *DepthError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("nested deeper than %d levels (line %d)", e.Max, e.Line)
	}
	return fmt.Sprintf("nested deeper than %d levels (byte %d)", e.Max, e.Offset)
}

func (e *DepthError) Unwrap() error { return ErrTooDeep }
