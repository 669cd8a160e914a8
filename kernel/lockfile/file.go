package lockfile

import (
	"io"
	"os"

	"github.com/agentnode/agentnode/kernel/bounded"
	"github.com/agentnode/agentnode/kernel/reason"
)

// Load reads and parses the lockfile at path. A missing file is an error
// wrapping fs.ErrNotExist; content errors wrap ErrInvalid. Every error
// carries the reason code lockfile_error.
//
// The file is opened O_NOFOLLOW|O_NONBLOCK and must be a regular file
// (kernel/bounded): a symlink, FIFO or device in its place is refused at
// once. (cmd/agentnode/lockedit's WriteFile renames over the path, so a
// symlink there would not survive the next write anyway.)
func Load(path string) (*Document, error) {
	f, err := bounded.Open(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, reason.New(reason.LockfileError, "lockfile %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, reason.New(reason.LockfileError, "read lockfile %s: %w", path, err)
	}
	d, err := Parse(data)
	if err != nil {
		return nil, reason.New(reason.LockfileError, "lockfile %s: %w", path, err)
	}
	return d, nil
}
