package plugincat

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/pluginhost"
)

// TestScanOrderMatchesLaunch checks that the listing's first entry of a
// kind/name (the one `plugins list` shows as running) is the file a launch
// finds (pluginhost.Lookup), over the cases where the two could part: a
// plugin in both directories, a directory, a FIFO and a symlink to a
// directory in the bin directory in front of a home file, a dangling
// symlink, a symlink from home to the bin file, and a plugin only at home.
func TestScanOrderMatchesLaunch(t *testing.T) {
	e := newEnv(t) // bin/agentnode-trust-faulty
	plugins := home.PluginsDir(e.home)
	install(t, plugins, "agentnode-trust-faulty") // shadowed by bin's
	if err := os.Mkdir(filepath.Join(e.bin, "agentnode-guard-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	install(t, plugins, "agentnode-guard-dir")
	if err := syscall.Mkfifo(filepath.Join(e.bin, "agentnode-guard-fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	install(t, plugins, "agentnode-guard-fifo")
	if err := os.Symlink(t.TempDir(), filepath.Join(e.bin, "agentnode-guard-dirlink")); err != nil {
		t.Fatal(err)
	}
	install(t, plugins, "agentnode-guard-dirlink")
	if err := os.Symlink(filepath.Join(t.TempDir(), "gone"), filepath.Join(e.bin, "agentnode-sandbox-dangling")); err != nil {
		t.Fatal(err)
	}
	install(t, plugins, "agentnode-sandbox-dangling")
	install(t, e.bin, "agentnode-broker-llm")
	if err := os.Symlink(filepath.Join(e.bin, "agentnode-broker-llm"), filepath.Join(plugins, "agentnode-broker-llm")); err != nil {
		t.Fatal(err)
	}
	install(t, plugins, "agentnode-egress-proxy")

	cands, err := scan(e.home, e.bin)
	if err != nil {
		t.Fatal(err)
	}
	first := map[string]candidate{}
	for _, c := range cands {
		if _, ok := first[pluginhost.Key(c.Kind, c.Name)]; !ok {
			first[pluginhost.Key(c.Kind, c.Name)] = c
		}
	}
	for _, key := range []struct{ kind, name, want string }{
		{"trust", "faulty", e.path},
		{"guard", "dir", filepath.Join(plugins, "agentnode-guard-dir")},
		{"guard", "fifo", filepath.Join(plugins, "agentnode-guard-fifo")},
		{"guard", "dirlink", filepath.Join(plugins, "agentnode-guard-dirlink")},
		{"sandbox", "dangling", ""}, // an error for both
		{"broker", "llm", filepath.Join(e.bin, "agentnode-broker-llm")},
		{"egress", "proxy", filepath.Join(plugins, "agentnode-egress-proxy")},
		{"trust", "absent", ""},
	} {
		k := pluginhost.Key(key.kind, key.name)
		path, found, err := pluginhost.Lookup(e.home, e.bin, key.kind, key.name)
		c, listed := first[k]
		switch {
		case key.name == "absent":
			if found || err != nil || listed {
				t.Errorf("%s: Lookup = %q, %v, %v; listed %v; want nothing", k, path, found, err, listed)
			}
		case key.want == "":
			if err == nil || !listed || c.Err == nil || c.Source != SourceBin {
				t.Errorf("%s: Lookup = %q, %v, %v; listed %+v; want an error from both", k, path, found, err, c)
			}
		default:
			want, rerr := filepath.EvalSymlinks(key.want)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if err != nil || !found || path != want || !listed || c.Err != nil || c.Path != path {
				t.Errorf("%s: Lookup = %q, %v, %v; listed first %+v; want %s from both", k, path, found, err, c, want)
			}
		}
	}
}

func TestParseFileName(t *testing.T) {
	for _, tc := range []struct {
		in         string
		kind, name string
		ok         bool
	}{
		{"agentnode-trust-default", "trust", "default", true},
		{"agentnode-sandbox-libcontainer", "sandbox", "libcontainer", true},
		{"agentnode-guard-pii-2", "guard", "pii-2", true},
		{"agentnode-broker-llm", "broker", "llm", true},
		{"agentnode-trust-0", "trust", "0", true},
		{"agentnode", "", "", false},
		{"agentnode-trust", "", "", false},
		{"agentnode-trust-", "", "", false},
		{"agentnode-trust--x", "", "", false},
		{"agentnode-trust-Faulty", "", "", false},
		{"agentnode-trust-faulty.mode", "", "", false},
		{"agentnode-trust-a_b", "", "", false},
		{"agentnode-nokind-x", "", "", false},
		{"xagentnode-trust-x", "", "", false},
		{"agentnode-trust-x y", "", "", false},
	} {
		kind, name, ok := ParseFileName(tc.in)
		if kind != tc.kind || name != tc.name || ok != tc.ok {
			t.Errorf("ParseFileName(%q) = %q, %q, %v; want %q, %q, %v", tc.in, kind, name, ok, tc.kind, tc.name, tc.ok)
		}
	}
}
