package plugincat

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/pluginhost"
	"github.com/agentnode/agentnode/kernel/reason"
)

// plugBytes is the content of the test's plugin files: listing and pinning
// hash a file and never run it.
var plugBytes = []byte("#!/bin/sh\necho plugin\n")

// env is one test installation: an agentnode home and a bin directory
// holding bin/agentnode-trust-faulty.
type env struct {
	home, bin string
	path      string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{home: t.TempDir(), bin: t.TempDir()}
	e.path = install(t, e.bin, "agentnode-trust-faulty")
	return e
}

// install writes a plugin file at dir/name, mode 0755.
func install(t *testing.T, dir, name string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, plugBytes, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeBin is a plugin file with plugBytes, outside any bin directory.
func fakeBin(t *testing.T) string { return install(t, t.TempDir(), "plugin") }

// replace writes a new file over path (a new inode).
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

func pinsOf(t *testing.T, homeDir string) map[string]pluginhost.PinValue {
	t.Helper()
	pins, err := pluginhost.LoadPins(homeDir)
	if err != nil {
		t.Fatal(err)
	}
	return pins
}

func TestPinWritesPinFile(t *testing.T) {
	e := newEnv(t)
	p, err := Pin(e.home, e.path)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := hashFile(fakeBin(t))
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != "trust" || p.Name != "faulty" || p.Path != e.path || p.SHA256 != sum {
		t.Fatalf("Pin = %+v, want trust/faulty %s %s", p, e.path, sum)
	}
	fi, err := os.Stat(pluginhost.PinsPath(e.home))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("pins.json mode %v, want 0600", fi.Mode().Perm())
	}
	di, err := os.Stat(home.PluginsDir(e.home))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("plugins dir mode %v, want 0700", di.Mode().Perm())
	}
	got := pinsOf(t, e.home)
	want := map[string]string{"path": e.path, "sha256": sum}
	if len(got) != 1 || got["trust-faulty"].Path != want["path"] || got["trust-faulty"].SHA256 != want["sha256"] {
		t.Fatalf("pins.json = %v, want {trust-faulty: %v}", got, want)
	}
	// No temp files left behind by the atomic write.
	des, _ := os.ReadDir(home.PluginsDir(e.home))
	for _, de := range des {
		if de.Name() != pluginhost.PinsFile {
			t.Errorf("stray file %s in plugins dir", de.Name())
		}
	}

	// A second plugin is added, the first is kept.
	other := install(t, e.bin, "agentnode-trust-other")
	if _, err := Pin(e.home, other); err != nil {
		t.Fatal(err)
	}
	if got := pinsOf(t, e.home); len(got) != 2 || got["trust-faulty"].SHA256 != sum || got["trust-other"].Path != other {
		t.Fatalf("after second pin: %v", got)
	}
}

func TestPinRefusesBadFiles(t *testing.T) {
	e := newEnv(t)
	bad := install(t, e.bin, "trust-faulty")
	if _, err := Pin(e.home, bad); !errors.Is(err, ErrInvalidName) {
		t.Errorf("Pin(%s) = %v, want ErrInvalidName", bad, err)
	}
	if _, err := Pin(e.home, filepath.Join(e.bin, "agentnode-trust-missing")); err == nil {
		t.Error("Pin of a missing file succeeded")
	}
	replace(t, e.path, plugBytes) // a fresh inode
	if err := os.Chmod(e.path, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Pin(e.home, e.path); !errors.Is(err, reason.ErrPluginUnpinned) {
		t.Errorf("Pin of a world-writable file = %v, want ErrPluginUnpinned", err)
	}
	if os.Geteuid() == 0 {
		// Owned by another user, who could swap it after the pin check.
		if err := os.Chmod(e.path, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(e.path, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		if _, err := Pin(e.home, e.path); !errors.Is(err, reason.ErrPluginUnpinned) || !strings.Contains(err.Error(), "uid 4242") {
			t.Errorf("Pin of a file owned by uid 4242 = %v, want ErrPluginUnpinned", err)
		}
	}
	if _, err := os.Stat(pluginhost.PinsPath(e.home)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pins.json written by failed pins: %v", err)
	}
}

func TestPinSymlinkRecordsTarget(t *testing.T) {
	e := newEnv(t)
	link := filepath.Join(t.TempDir(), "agentnode-trust-linked")
	if err := os.Symlink(e.path, link); err != nil {
		t.Fatal(err)
	}
	p, err := Pin(e.home, link)
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != "trust" || p.Name != "linked" || p.Path != e.path {
		t.Fatalf("Pin(symlink) = %+v, want trust/linked at %s", p, e.path)
	}
}

func TestPinBundled(t *testing.T) {
	e := newEnv(t)
	install(t, e.bin, "agentnode-trust-second")
	if err := os.WriteFile(filepath.Join(e.bin, "agentnode"), []byte("the cli"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.bin, "agentnode-bogus-x"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	pins, err := PinBundled(e.home, e.bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(pins) != 2 || pins[0].Name != "faulty" || pins[1].Name != "second" {
		t.Fatalf("PinBundled = %+v, want faulty and second", pins)
	}
	got := pinsOf(t, e.home)
	if len(got) != 2 || got["trust-second"].Path != filepath.Join(e.bin, "agentnode-trust-second") {
		t.Fatalf("pins.json = %v", got)
	}
	// An empty bin dir pins nothing and writes nothing.
	empty := t.TempDir()
	h2 := t.TempDir()
	if pins, err := PinBundled(h2, empty); err != nil || len(pins) != 0 {
		t.Fatalf("PinBundled(empty) = %v, %v", pins, err)
	}
	if _, err := os.Stat(pluginhost.PinsPath(h2)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pins.json written for an empty bin dir: %v", err)
	}
}

func TestDiscover(t *testing.T) {
	e := newEnv(t)
	homeCopy := install(t, home.PluginsDir(e.home), "agentnode-trust-faulty")
	homeOnly := install(t, home.PluginsDir(e.home), "agentnode-guard-extra")
	for _, junk := range []string{"agentnode", "agentnode-nope-x", "agentnode-trust-Bad", "README"} {
		if err := os.WriteFile(filepath.Join(e.bin, junk), []byte("junk"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Pin(e.home, e.path); err != nil {
		t.Fatal(err)
	}
	got, err := Discover(e.home, e.bin)
	if err != nil {
		t.Fatal(err)
	}
	summary := func(es []Entry) string {
		var b strings.Builder
		for _, x := range es {
			b.WriteString(x.Kind + "/" + x.Name + " " + x.Source + " " + x.Hash)
			if x.Pinned {
				b.WriteString(" pinned")
			}
			if x.Shadowed {
				b.WriteString(" shadowed-by:" + x.ShadowedBy)
			}
			if x.PinnedPath != "" {
				b.WriteString(" pinned-at:" + x.PinnedPath)
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	want := "trust/faulty bin ok pinned\n" +
		"trust/faulty home unpinned shadowed-by:" + e.path + " pinned-at:" + e.path + "\n" +
		"guard/extra home unpinned\n"
	if s := summary(got); s != want {
		t.Fatalf("Discover:\n%s\nwant:\n%s", s, want)
	}
	if got[1].Path != homeCopy || got[2].Path != homeOnly {
		t.Errorf("paths %s, %s; want %s, %s", got[1].Path, got[2].Path, homeCopy, homeOnly)
	}

	// The pinned binary changes.
	replace(t, e.path, []byte("#!/bin/sh\necho different\n"))
	got, err = Discover(e.home, e.bin)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Hash != HashChanged || !got[0].Pinned {
		t.Errorf("after change: %s", summary(got))
	}

	// The pinned binary disappears; the home copy takes over but is not the
	// pinned file, and the stale pin is listed as missing.
	if err := os.Remove(e.path); err != nil {
		t.Fatal(err)
	}
	got, err = Discover(e.home, e.bin)
	if err != nil {
		t.Fatal(err)
	}
	want = "trust/faulty home unpinned pinned-at:" + e.path + "\n" +
		"trust/faulty pin missing pinned shadowed-by:" + homeCopy + "\n" +
		"guard/extra home unpinned\n"
	if s := summary(got); s != want {
		t.Fatalf("after removal:\n%s\nwant:\n%s", s, want)
	}
}

func TestMalformedPinsRefuse(t *testing.T) {
	e := newEnv(t)
	if _, err := Pin(e.home, e.path); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"not json":    "{",
		"unknown key": `{"trust-faulty": {"path": "/x", "sha256": "` + strings.Repeat("a", 64) + `", "extra": 1}}`,
		"bad key":     `{"faulty": {"path": "/x", "sha256": "` + strings.Repeat("a", 64) + `"}}`,
		"short hash":  `{"trust-faulty": {"path": "/x", "sha256": "abc"}}`,
		"rel path":    `{"trust-faulty": {"path": "x", "sha256": "` + strings.Repeat("a", 64) + `"}}`,
	} {
		if err := os.WriteFile(pluginhost.PinsPath(e.home), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Discover(e.home, e.bin); !errors.Is(err, reason.ErrPluginUnpinned) {
			t.Errorf("%s: Discover = %v, want ErrPluginUnpinned", name, err)
		}
	}
	// A pin file others may write is not trusted.
	if _, err := Pin(e.home, e.path); err == nil {
		t.Fatal("Pin over a malformed pin file succeeded")
	}
	if err := os.WriteFile(pluginhost.PinsPath(e.home), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Pin(e.home, e.path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(pluginhost.PinsPath(e.home), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Discover(e.home, e.bin); !errors.Is(err, reason.ErrPluginUnpinned) {
		t.Errorf("world-writable pins: Discover = %v, want ErrPluginUnpinned", err)
	}
}
