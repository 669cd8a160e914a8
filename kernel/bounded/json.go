package bounded

import "github.com/agentnode/agentnode/sdk/jsondepth"

// JSONDepth returns a *DepthError (ErrTooDeep) if data nests objects and
// arrays more than max levels deep: {"a":1} is 1 level, [[1]] 2. The scan
// is sdk/jsondepth's (shared with Guard inspectors); see there for what it
// counts. It may run before any decoder.
func JSONDepth(data []byte, max int) error {
	if off, over := jsondepth.Exceeds(data, max); over {
		return &DepthError{Max: max, Offset: int64(off)}
	}
	return nil
}
