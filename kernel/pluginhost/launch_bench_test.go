package pluginhost

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/agentnode/agentnode/sdk/plugin"
)

// BenchmarkPluginStart compares starting the pinned builtin Guard inspector
// through a Host (locate, pin check, hash of the ~20 MB binary, fork on the
// launcher thread, go-plugin handshake with AutoMTLS, Info, then Close) with
// the raw thing it wraps: exec of the same binary with the handshake
// variables, reading the address it announces on stdout, and kill.
func BenchmarkPluginStart(b *testing.B) {
	path := buildBuiltinGuard(b)
	b.Run("host", func(b *testing.B) {
		homeDir := b.TempDir()
		testPin(b, homeDir, path)
		for b.Loop() {
			h := New(Options{HomeDir: homeDir, BinDir: filepath.Dir(path), Logger: hclog.NewNullLogger()})
			if _, err := h.Guard(context.Background(), "builtin"); err != nil {
				b.Fatal(err)
			}
			h.Close()
		}
	})
	b.Run("raw-exec", func(b *testing.B) {
		sockDir := b.TempDir()
		for b.Loop() {
			cmd := exec.Command(path)
			cmd.Env = []string{
				plugin.Handshake.MagicCookieKey + "=" + plugin.Handshake.MagicCookieValue,
				"PLUGIN_PROTOCOL_VERSIONS=1",
				"PLUGIN_UNIX_SOCKET_DIR=" + sockDir,
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 1)
			if _, err := stdout.Read(buf); err != nil {
				b.Fatalf("handshake: %v", err)
			}
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
}
