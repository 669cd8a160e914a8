package image

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/reason"
)

// Resolve itself is tested in cmd/agentnode/imagebuild (TestResolve), on
// images that package builds, pulls and damages.

func TestParseRef(t *testing.T) {
	d := strings.Repeat("0123456789abcdef", 4)
	for _, ok := range []string{"agentnode/sandbox@sha256:" + d, "localhost:5000/a/b@sha256:" + d, "busybox@sha256:" + d} {
		if _, h, err := ParseRef(ok); err != nil || h != d {
			t.Errorf("ParseRef(%q) = %q, %v", ok, h, err)
		}
	}
	for _, bad := range []string{"Agentnode/sandbox@sha256:" + d, "a//b@sha256:" + d, "/a@sha256:" + d, "a@sha256:" + d + "0", "a@@sha256:" + d} {
		if _, _, err := ParseRef(bad); !errors.Is(err, reason.ErrImageUnpinned) {
			t.Errorf("ParseRef(%q) = %v, want image_unpinned", bad, err)
		}
	}
}

func TestTreeHash(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	h1, err := TreeHash(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Renaming changes the hash even with the same contents.
	if err := os.Rename(filepath.Join(dir, "f"), filepath.Join(dir, "g")); err != nil {
		t.Fatal(err)
	}
	if h2, err := TreeHash(dir, nil); err != nil || h2 == h1 {
		t.Fatalf("rename: %s, %v", h2, err)
	}
	if err := os.Rename(filepath.Join(dir, "g"), filepath.Join(dir, "f")); err != nil {
		t.Fatal(err)
	}
	if h3, err := TreeHash(dir, nil); err != nil || h3 != h1 {
		t.Fatalf("rename back: %s, %v; want %s", h3, err, h1)
	}
	if _, err := TreeHash(filepath.Join(dir, "missing"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing dir: %v", err)
	}
}
