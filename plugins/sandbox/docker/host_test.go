package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEndpointFor: no host file → the default socket; a valid one → its
// socket; anything doubtful → an error, never a silent fallback.
func TestEndpointFor(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "agentnode-sandbox-docker")
	hostFile := exe + HostFileSuffix

	ep, err := endpointFor(exe)
	if err != nil || ep.host != DefaultHost || ep.socket != "/var/run/docker.sock" || ep.source != "default" {
		t.Fatalf("no host file: %+v, %v", ep, err)
	}
	if ep, err := endpointFor(""); err != nil || ep.host != DefaultHost {
		t.Fatalf("unknown executable: %+v, %v", ep, err)
	}

	write := func(content string, mode os.FileMode) {
		t.Helper()
		_ = os.Remove(hostFile)
		if err := os.WriteFile(hostFile, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(hostFile, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("# a private engine\n\n  unix:///run/user/1000/docker.sock  \n", 0o644)
	ep, err = endpointFor(exe)
	if err != nil || ep.host != "unix:///run/user/1000/docker.sock" || ep.socket != "/run/user/1000/docker.sock" || ep.source != hostFile {
		t.Fatalf("valid host file: %+v, %v", ep, err)
	}

	for name, tc := range map[string]struct {
		content string
		mode    os.FileMode
		want    string
	}{
		"tcp":             {"tcp://127.0.0.1:2375\n", 0o644, "only unix"},
		"ssh":             {"ssh://host\n", 0o644, "only unix"},
		"relative":        {"unix://docker.sock\n", 0o644, "clean absolute"},
		"unclean":         {"unix:///run/../etc/docker.sock\n", 0o644, "clean absolute"},
		"empty":           {"# nothing\n\n", 0o644, "names no engine"},
		"two":             {"unix:///a.sock\nunix:///b.sock\n", 0o644, "2 endpoints"},
		"group-writable":  {"unix:///a.sock\n", 0o664, "writable by group or others"},
		"world-writable":  {"unix:///a.sock\n", 0o646, "writable by group or others"},
		"larger than 4 k": {"unix:///a.sock\n#" + strings.Repeat("x", maxHostFile) + "\n", 0o644, "larger than"},
	} {
		t.Run(name, func(t *testing.T) {
			write(tc.content, tc.mode)
			if ep, err := endpointFor(exe); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("endpointFor = %+v, %v; want an error with %q", ep, err, tc.want)
			}
		})
	}

	t.Run("symlink", func(t *testing.T) {
		_ = os.Remove(hostFile)
		target := filepath.Join(dir, "elsewhere")
		if err := os.WriteFile(target, []byte("unix:///a.sock\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, hostFile); err != nil {
			t.Fatal(err)
		}
		if ep, err := endpointFor(exe); err == nil || !strings.Contains(err.Error(), "symlink") {
			t.Fatalf("symlinked host file: %+v, %v", ep, err)
		}
	})
	t.Run("directory", func(t *testing.T) {
		_ = os.Remove(hostFile)
		if err := os.Mkdir(hostFile, 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(hostFile)
		if ep, err := endpointFor(exe); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("directory as host file: %+v, %v", ep, err)
		}
	})
	t.Run("someone else's", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("chown needs root")
		}
		write("unix:///a.sock\n", 0o644)
		if err := os.Chown(hostFile, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if ep, err := endpointFor(exe); err == nil || !strings.Contains(err.Error(), "owned by uid 12345") {
			t.Fatalf("host file of another user: %+v, %v", ep, err)
		}
	})
}

func TestOrphaned(t *testing.T) {
	self, err := processOwner(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	prefix, _, _ := cutLast(self, "/")
	for owner, want := range map[string]bool{
		self:                       false, // alive
		prefix + "/999999999:1":    true,  // no such process
		prefix + "/1:999999999999": true,  // pid reused
		"other-boot/pid:[1]/1:1":   false, // cannot judge
		"":                         false,
		prefix + "/x:1":            false,
		prefix + "/-4:1":           false,
		strings.Replace(self, "pid:", "pid:9", 1): false, // another pid namespace
	} {
		if got := orphaned(owner, self); got != want {
			t.Errorf("orphaned(%q) = %v, want %v", owner, got, want)
		}
	}
}
