package sandboxtest

import (
	"os"
	"strings"
	"testing"
)

// TestPluginBinary runs the suite against a plugin binary named by the
// environment, the way CI runs it against each bundled backend:
//
//	SANDBOXTEST_PLUGIN=bin/agentnode-sandbox-libcontainer \
//	SANDBOXTEST_IMAGE_STORE=$AGENTNODE_HOME/images SANDBOXTEST_IMAGE=agentnode/sandbox@sha256:... \
//	go test ./sdk/sandbox/sandboxtest -run TestPluginBinary -v
//
// SANDBOXTEST_IMAGE and SANDBOXTEST_IMAGE_STORE fill Config.Image and
// Config.ImageStore; SANDBOXTEST_SKIP is a comma-separated Config.Skip;
// SANDBOXTEST_WORKSPACE_WRITE_REFUSED=1 sets Config.WorkspaceWriteRefused
// (the Docker backend); SANDBOXTEST_NO_USER_NAMESPACE=REASON sets
// Config.NoUserNamespace (Docker, Podman).
func TestPluginBinary(t *testing.T) {
	path := os.Getenv("SANDBOXTEST_PLUGIN")
	if path == "" {
		t.Skip("SANDBOXTEST_PLUGIN is not set")
	}
	var skip []string
	if s := os.Getenv("SANDBOXTEST_SKIP"); s != "" {
		skip = strings.Split(s, ",")
	}
	Run(t, LaunchPlugin(t, path), Config{
		Image:      os.Getenv("SANDBOXTEST_IMAGE"),
		ImageStore: os.Getenv("SANDBOXTEST_IMAGE_STORE"),
		Skip:       skip,
		// A backend that refuses a writable workspace (docker).
		WorkspaceWriteRefused: os.Getenv("SANDBOXTEST_WORKSPACE_WRITE_REFUSED") == "1",
		NoUserNamespace:       os.Getenv("SANDBOXTEST_NO_USER_NAMESPACE"),
	})
}
