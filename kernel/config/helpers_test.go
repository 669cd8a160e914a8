package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// setUp writes Defaults() as the config of a fresh directory (what
// `agentnode setup` writes; writing is cmd/agentnode/configedit's, whose
// tests cover it) and returns its path.
func setUp(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "home", "config.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(Defaults(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(data))
	return path
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
