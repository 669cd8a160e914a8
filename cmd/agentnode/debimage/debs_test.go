package debimage

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/imagebuild"
)

// policyOut is `apt-cache policy` on a Debian 12 host that also has a
// vendor's repository (NodeSource's shape) configured.
const policyOut = `Package files:
 100 /var/lib/dpkg/status
     release a=now
 600 https://deb.nodesource.com/node_20.x nodistro/main amd64 Packages
     release o=Node Source,n=nodistro,l=Node Source,c=main,b=amd64
     origin deb.nodesource.com
 500 http://deb.debian.org/debian-security bookworm-security/main amd64 Packages
     release v=12,o=Debian,a=oldstable-security,n=bookworm-security,l=Debian-Security,c=main,b=amd64
     origin deb.debian.org
 500 http://deb.debian.org/debian bookworm/main amd64 Packages
     release v=12.15,o=Debian,a=oldstable,n=bookworm,l=Debian Main,c=main,b=amd64
     origin deb.debian.org
Pinned packages:
`

// TestNewestFromDebian: the version chosen is the newest one a Debian
// package file offers — not the vendor's newer one, not one only in dpkg's
// status file — and none when Debian offers none.
func TestNewestFromDebian(t *testing.T) {
	files := debianFiles(policyOut)
	if len(files) != 2 || !files["http://deb.debian.org/debian bookworm/main amd64 Packages"] ||
		files["https://deb.nodesource.com/node_20.x nodistro/main amd64 Packages"] {
		t.Fatalf("Debian's files: %v", files)
	}
	for _, c := range []struct{ out, want string }{
		{`nodejs:
  Installed: 20.20.2-1nodesource1
  Candidate: 20.20.2-1nodesource1
  Version table:
 *** 20.20.2-1nodesource1 600
        600 https://deb.nodesource.com/node_20.x nodistro/main amd64 Packages
        100 /var/lib/dpkg/status
     18.20.4+dfsg-1~deb12u3 500
        500 http://deb.debian.org/debian-security bookworm-security/main amd64 Packages
     18.20.4+dfsg-1~deb12u2 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
`, "18.20.4+dfsg-1~deb12u3"},
		{`libc6:
  Installed: 2.36-9+deb12u14
  Candidate: 2.36-9+deb12u14
  Version table:
 *** 2.36-9+deb12u14 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
        100 /var/lib/dpkg/status
     2.36-9+deb12u7 500
        500 http://deb.debian.org/debian-security bookworm-security/main amd64 Packages
`, "2.36-9+deb12u14"},
		{`local-only:
  Installed: 1.0
  Candidate: 1.0
  Version table:
 *** 1.0 100
        100 /var/lib/dpkg/status
`, ""},
		{`vendor-only:
  Installed: (none)
  Candidate: 2.0
  Version table:
     2.0 600
        600 https://deb.nodesource.com/node_20.x nodistro/main amd64 Packages
`, ""},
		{"", ""},
	} {
		if got := newestFrom(c.out, files); got != c.want {
			t.Errorf("%.20q: %q, want %q", c.out, got, c.want)
		}
	}
}

// TestFetchUnpackCollect takes a small real package from Debian's archive
// (zlib1g, with its dependency closure through libc6): a cached .deb whose
// bytes were changed is not used but downloaded again; the unpacked root's
// dpkg database lists what the .deb holds; Collect takes its files, and
// refuses a file changed after unpacking (ErrChecksum).
func TestFetchUnpackCollect(t *testing.T) {
	if out, err := exec.Command("apt-cache", "policy", "zlib1g").Output(); err != nil || !strings.Contains(string(out), " Packages") {
		if os.Getenv("AGENTNODE_REQUIRE_NODE") == "1" {
			t.Fatalf("apt's lists offer no zlib1g (run apt-get update): %v", err)
		}
		t.Skipf("apt's lists offer no zlib1g (run apt-get update): %v", err)
	}
	ctx := context.Background()
	cache := t.TempDir()
	debs, err := Fetch(ctx, cache, []string{"zlib1g"}, "")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(debs, func(d Deb) bool { return d.Name == "zlib1g" })
	if i < 0 || !slices.ContainsFunc(debs, func(d Deb) bool { return d.Name == "libc6" }) {
		t.Fatalf("closure %+v", debs)
	}
	z := debs[i]
	// A cached file changed in place: fetched again, the right bytes.
	data, err := os.ReadFile(z.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(z.Path, append(data, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := Fetch(ctx, cache, []string{"zlib1g"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := fileSHA256(z.Path); got != z.SHA256 || len(again) != len(debs) {
		t.Fatalf("after tampering the cache: sha256 %s, want %s", got, z.SHA256)
	}

	root := t.TempDir()
	if err := Unpack(ctx, debs, root); err != nil {
		t.Fatal(err)
	}
	list, err := os.ReadFile(filepath.Join(root, "var/lib/dpkg/info/zlib1g.list"))
	if err != nil || !strings.Contains(string(list), "/libz.so.1\n") {
		t.Fatalf("zlib1g.list: %v %q", err, list)
	}
	files, contents, err := Collect(Options{Root: root, Roots: []string{"zlib1g"}})
	if err != nil {
		t.Fatal(err)
	}
	var lib *imagebuild.File
	for i := range files {
		if strings.HasPrefix(files[i].Name, "usr/lib/") && strings.Contains(files[i].Name, "/libz.so.1.") {
			lib = &files[i]
		}
	}
	if lib == nil || lib.Type != tar.TypeReg || len(contents.Packages) != len(debs) {
		t.Fatalf("libz not collected (%d packages): %+v", len(contents.Packages), contents)
	}
	host := filepath.Join(root, lib.Name)
	if _, err := os.Stat(host); err != nil {
		host = filepath.Join(root, strings.TrimPrefix(lib.Name, "usr/")) // an unmerged /lib
	}
	if err := os.WriteFile(host, append(bytes.Clone(lib.Body), 'x'), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Collect(Options{Root: root, Roots: []string{"zlib1g"}}); !errors.Is(err, ErrChecksum) {
		t.Fatalf("a changed file: %v, want ErrChecksum", err)
	}
}
