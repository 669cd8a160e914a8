package config

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentnode/agentnode/kernel/reason"
)

// A FIFO in place of config.json is refused at once (the open does not
// wait for a writer), and so is a config nested 20,000 deep, before the
// recursive decoder sees it.
func TestHostileConfigFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(dir, "deep.json")
	writeFile(t, deep, `{"trust":`+strings.Repeat(`{"a":`, 20000)+`1`+strings.Repeat(`}`, 20001))
	for path, want := range map[string]string{
		fifo: "config " + fifo + " is a named pipe (FIFO): not a regular file",
		deep: "nested deeper than 64 levels",
	} {
		_, err := Load(path)
		if !errors.Is(err, reason.ErrConfigInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want config_invalid with %q", filepath.Base(path), err, want)
		}
	}
}
