package sandboxtest

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/agentnode/agentnode/sdk/plugin"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// LaunchPlugin starts the sandbox plugin binary at path the way agentnode
// does (go-plugin handshake, gRPC only, the binary pinned by its SHA-256)
// and returns the host-side client. The plugin is killed when the test
// ends; its logs go to the test log.
func LaunchPlugin(tb testing.TB, path string) *sandbox.Client {
	tb.Helper()
	c, err := launchPlugin(tb, path)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func launchPlugin(tb testing.TB, path string) (*sandbox.Client, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sandboxtest: plugin: %w", err)
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("sandboxtest: hashing the plugin: %w", err)
	}
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  plugin.Handshake,
		VersionedPlugins: plugin.VersionedSet(plugin.KindSandbox, &sandbox.GRPCPlugin{}),
		Cmd:              exec.Command(path),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		SecureConfig:     &goplugin.SecureConfig{Checksum: h.Sum(nil), Hash: sha256.New()},
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:   "sandboxtest-plugin",
			Output: tbWriter{tb},
			Level:  hclog.Warn,
		}),
	})
	tb.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		return nil, fmt.Errorf("sandboxtest: starting plugin %s: %w", path, err)
	}
	raw, err := rpc.Dispense(plugin.KindSandbox)
	if err != nil {
		return nil, fmt.Errorf("sandboxtest: dispensing plugin %s: %w", path, err)
	}
	c, ok := raw.(*sandbox.Client)
	if !ok {
		return nil, fmt.Errorf("sandboxtest: plugin %s dispensed %T, want *sandbox.Client", path, raw)
	}
	return c, nil
}

// tbWriter sends plugin logs to the test log.
type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Log(string(p))
	return len(p), nil
}
