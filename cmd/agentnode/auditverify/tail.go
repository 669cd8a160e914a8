package auditverify

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/bounded"
)

// Tail returns the last n records of the log in dir, oldest first, reading
// only the end of the files (n <= 0: every record). A missing log has no
// records. A torn last line is skipped (Verify reports it); any other line
// that is not a valid record is an error. Tail does not check the chain:
// that is Verify's job. Errors wrap reason.ErrAuditUnavailable.
func Tail(dir string, n int) ([]audit.Record, error) {
	lk, err := audit.ReadLock(dir)
	if err != nil {
		return nil, unavailable("lock audit log for reading: %w", err)
	}
	defer audit.ReadUnlock(lk)
	files, err := audit.ListFiles(dir)
	if err != nil {
		return nil, unavailable("list audit files: %w", err)
	}
	var lines [][]byte
	for i := len(files) - 1; i >= 0 && (n <= 0 || len(lines) < n); i-- {
		more, err := tailFile(filepath.Join(dir, files[i].Name), n-len(lines))
		if err != nil {
			return nil, unavailable("read audit log: %w", err)
		}
		lines = append(more, lines...)
	}
	if n <= 0 {
		n = len(lines)
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	recs := make([]audit.Record, len(lines))
	for i, line := range lines {
		if _, p, detail := audit.ParseLine(line, false); p != "" {
			return nil, unavailable("unreadable audit record: %s: %s", p, detail)
		}
		if err := json.Unmarshal(line, &recs[i]); err != nil {
			return nil, unavailable("unreadable audit record: %w", err)
		}
	}
	return recs, nil
}

func tailFile(path string, n int) ([][]byte, error) {
	f, err := bounded.Open(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	lines, _, err := audit.LastLines(f, st.Size(), n)
	return lines, err
}
