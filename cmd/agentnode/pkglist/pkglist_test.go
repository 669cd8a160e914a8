package pkglist_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/pkginstall"
	"github.com/agentnode/agentnode/cmd/agentnode/pkglist"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/kernel/validcache"
)

func manifestYAML(id, summary string) string {
	return `manifest_version: "0.2"
package_id: ` + id + `
package_type: toolpack
name: List test
publisher: test
version: 1.0.0
summary: ` + summary + `
runtime: exec
capabilities:
  tools:
    - {name: echo, description: Echo, entrypoint: bin/tool, input_schema: {type: object}}
`
}

// install puts n packages pkg-000.. into a store at root, through
// pkginstall (what `agentnode install` does).
func install(t *testing.T, root string, n int) {
	t.Helper()
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "bin", "tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	inst := pkginstall.Open(root)
	for i := range n {
		id := fmt.Sprintf("pkg-%03d", i)
		if err := os.WriteFile(filepath.Join(src, manifest.FileName), []byte(manifestYAML(id, "installed")), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := inst.Install(src, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// tamper replaces file of package id with content, as a tamperer with
// write access to the store would.
func tamper(t *testing.T, root, id, file, content string) {
	t.Helper()
	dir := filepath.Join(root, id)
	for _, d := range []string{dir, filepath.Join(dir, store.ContentDir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	name := filepath.Join(dir, file)
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// List loads every package as store.Get does, several at a time: the
// listing is in id order, the packages that cannot be loaded are left out
// and reported in id order, and a manifest changed after its verdict was
// kept is shown as it is now, not as it was.
func TestListIsGetOfEveryPackageInOrder(t *testing.T) {
	root := filepath.Join(t.TempDir(), "packages")
	if ps, err := pkglist.List(store.Open(root)); err != nil || len(ps) != 0 {
		t.Fatalf("List of a missing store = %v, %v", ps, err)
	}
	const n = 40
	install(t, root, n)
	s := store.Open(root).WithVerdicts(validcache.Open(filepath.Join(t.TempDir(), "valid")))
	if ps, err := pkglist.List(s); err != nil || len(ps) != n {
		t.Fatalf("List = %d packages, %v; want %d", len(ps), err, n)
	}
	tamper(t, root, "pkg-007", store.MetaFile, "{")
	tamper(t, root, "pkg-003", filepath.Join(store.ContentDir, manifest.FileName), "package_id: [")
	tamper(t, root, "pkg-021", filepath.Join(store.ContentDir, manifest.FileName),
		strings.Replace(manifestYAML("pkg-021", "changed"), "1.0.0", "2.0.0", 1))
	tamper(t, root, "pkg-030", filepath.Join(store.ContentDir, manifest.FileName), manifestYAML("pkg-030", "changed"))
	if err := os.Mkdir(filepath.Join(root, ".staging-x"), 0o700); err != nil { // never a package
		t.Fatal(err)
	}

	ps, err := pkglist.List(s)
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.ID)
		want := "installed"
		if p.ID == "pkg-030" {
			want = "changed"
		}
		if p.Manifest.Summary != want {
			t.Errorf("%s: summary %q, want %q", p.ID, p.Manifest.Summary, want)
		}
	}
	var wantIDs []string
	for i := range n {
		if i != 3 && i != 7 && i != 21 {
			wantIDs = append(wantIDs, fmt.Sprintf("pkg-%03d", i))
		}
	}
	if strings.Join(ids, ",") != strings.Join(wantIDs, ",") {
		t.Errorf("List = %v\nwant %v", ids, wantIDs)
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok || len(j.Unwrap()) != 3 {
		t.Fatalf("List error = %v; want the 3 unreadable packages", err)
	}
	for i, id := range []string{"pkg-003", "pkg-007", "pkg-021"} {
		e := j.Unwrap()[i]
		if !strings.Contains(e.Error(), `"`+id+`"`) || !errors.Is(e, reason.ErrArtifactMismatch) {
			t.Errorf("error %d = %v; want %s's artifact mismatch", i, e, id)
		}
	}
}
