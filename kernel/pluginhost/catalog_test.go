package pluginhost

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/reason"
)

func TestMalformedPinsRefuse(t *testing.T) {
	e := newEnv(t, "ok", true)
	for name, content := range map[string]string{
		"not json":    "{",
		"unknown key": `{"trust-faulty": {"path": "/x", "sha256": "` + strings.Repeat("a", 64) + `", "extra": 1}}`,
		"bad key":     `{"faulty": {"path": "/x", "sha256": "` + strings.Repeat("a", 64) + `"}}`,
		"short hash":  `{"trust-faulty": {"path": "/x", "sha256": "abc"}}`,
		"rel path":    `{"trust-faulty": {"path": "x", "sha256": "` + strings.Repeat("a", 64) + `"}}`,
	} {
		if err := os.WriteFile(PinsPath(e.home), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadPins(e.home); !errors.Is(err, reason.ErrPluginUnpinned) {
			t.Errorf("%s: LoadPins = %v, want ErrPluginUnpinned", name, err)
		}
	}
	testPin(t, e.home, e.path)
	if err := os.Chmod(PinsPath(e.home), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPins(e.home); !errors.Is(err, reason.ErrPluginUnpinned) {
		t.Errorf("world-writable pins: LoadPins = %v, want ErrPluginUnpinned", err)
	}
}

// replace writes a new file over path (a new inode, so hard-linked copies
// keep their content).
func replace(t *testing.T, path string, content []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, content, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
