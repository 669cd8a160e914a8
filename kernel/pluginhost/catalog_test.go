package pluginhost

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/reason"
)

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

func TestPinWritesPinFile(t *testing.T) {
	e := newEnv(t, "ok", false)
	p, err := Pin(e.home, e.path)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := hashFile(faultyBin)
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != "trust" || p.Name != "faulty" || p.Path != e.path || p.SHA256 != sum {
		t.Fatalf("Pin = %+v, want trust/faulty %s %s", p, e.path, sum)
	}
	fi, err := os.Stat(PinsPath(e.home))
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
	if len(got) != 1 || got["trust-faulty"]["path"] != want["path"] || got["trust-faulty"]["sha256"] != want["sha256"] {
		t.Fatalf("pins.json = %v, want {trust-faulty: %v}", got, want)
	}
	// No temp files left behind by the atomic write.
	des, _ := os.ReadDir(home.PluginsDir(e.home))
	for _, de := range des {
		if de.Name() != PinsFile {
			t.Errorf("stray file %s in plugins dir", de.Name())
		}
	}

	// A second plugin is added, the first is kept.
	other := install(t, e.bin, "agentnode-trust-other", "ok")
	if _, err := Pin(e.home, other); err != nil {
		t.Fatal(err)
	}
	if got := pinsOf(t, e.home); len(got) != 2 || got["trust-faulty"]["sha256"] != sum || got["trust-other"]["path"] != other {
		t.Fatalf("after second pin: %v", got)
	}
}

func TestPinRefusesBadFiles(t *testing.T) {
	e := newEnv(t, "ok", false)
	bad := install(t, e.bin, "trust-faulty", "ok")
	if _, err := Pin(e.home, bad); !errors.Is(err, ErrInvalidName) {
		t.Errorf("Pin(%s) = %v, want ErrInvalidName", bad, err)
	}
	if _, err := Pin(e.home, filepath.Join(e.bin, "agentnode-trust-missing")); err == nil {
		t.Error("Pin of a missing file succeeded")
	}
	b, err := os.ReadFile(faultyBin)
	if err != nil {
		t.Fatal(err)
	}
	replace(t, e.path, b) // a copy: e.path is a hard link to the shared build
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
	if _, err := os.Stat(PinsPath(e.home)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pins.json written by failed pins: %v", err)
	}
}

func TestPinSymlinkRecordsTarget(t *testing.T) {
	e := newEnv(t, "ok", false)
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
	e := newEnv(t, "ok", false)
	install(t, e.bin, "agentnode-trust-second", "ok")
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
	if len(got) != 2 || got["trust-second"]["path"] != filepath.Join(e.bin, "agentnode-trust-second") {
		t.Fatalf("pins.json = %v", got)
	}
	// An empty bin dir pins nothing and writes nothing.
	empty := t.TempDir()
	h2 := t.TempDir()
	if pins, err := PinBundled(h2, empty); err != nil || len(pins) != 0 {
		t.Fatalf("PinBundled(empty) = %v, %v", pins, err)
	}
	if _, err := os.Stat(PinsPath(h2)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pins.json written for an empty bin dir: %v", err)
	}
}

func TestDiscover(t *testing.T) {
	e := newEnv(t, "ok", false)
	homeCopy := install(t, home.PluginsDir(e.home), "agentnode-trust-faulty", "ok")
	homeOnly := install(t, home.PluginsDir(e.home), "agentnode-guard-extra", "ok")
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
		if _, err := Discover(e.home, e.bin); !errors.Is(err, reason.ErrPluginUnpinned) {
			t.Errorf("%s: Discover = %v, want ErrPluginUnpinned", name, err)
		}
	}
	// A pin file others may write is not trusted.
	if _, err := Pin(e.home, e.path); err == nil {
		t.Fatal("Pin over a malformed pin file succeeded")
	}
	if err := os.WriteFile(PinsPath(e.home), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Pin(e.home, e.path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(PinsPath(e.home), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Discover(e.home, e.bin); !errors.Is(err, reason.ErrPluginUnpinned) {
		t.Errorf("world-writable pins: Discover = %v, want ErrPluginUnpinned", err)
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
