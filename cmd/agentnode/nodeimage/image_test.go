package nodeimage

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentnode/agentnode/cmd/agentnode/debimage"
	"github.com/agentnode/agentnode/cmd/agentnode/imagebuild"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// needArchive skips (fails under AGENTNODE_REQUIRE_NODE=1) unless apt's
// lists offer Debian's nodejs and the build's tools are installed.
func needArchive(t *testing.T) {
	t.Helper()
	miss := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("AGENTNODE_REQUIRE_NODE") == "1" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	for _, tool := range []string{"apt-get", "apt-cache", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			miss("%s: %v (a Debian host is needed)", tool, err)
		}
	}
	out, err := exec.Command("apt-cache", "madison", "nodejs").Output()
	if err != nil || !strings.Contains(string(out), " Packages") {
		miss("no archive in apt's lists offers nodejs (run apt-get update): %v %s", err, out)
	}
	if _, err := os.Stat(imagebuild.DefaultBusybox); err != nil {
		miss("%s: %v (install busybox-static)", imagebuild.DefaultBusybox, err)
	}
}

func baseOptions(t *testing.T) imagebuild.BuildOptions {
	t.Helper()
	fw := filepath.Join(t.TempDir(), imagebuild.ForwarderName)
	if err := sandboxtest.BuildForwarder(context.Background(), fw); err != nil {
		t.Fatal(err)
	}
	return imagebuild.BuildOptions{BusyboxPath: imagebuild.DefaultBusybox, ForwarderPath: fw}
}

// TestNodeImage builds the Node runtime image twice, into two homes, from
// the same downloaded .deb files, and requires the same digests; the
// packages are Debian's (nodejs's version is the archive's, whatever this
// host has installed); node runs inside the unpacked rootfs as uid 1000
// with nothing of the host visible; and a byte changed in the unpacked
// image, or a file added, is refused by the check before every run.
func TestNodeImage(t *testing.T) {
	needArchive(t)
	base := baseOptions(t)
	cache := t.TempDir()
	build := func(home string) (*image.Image, *Contents, time.Duration) {
		t.Helper()
		start := time.Now()
		img, c, err := Build(context.Background(), home, Options{Base: base, DebCache: cache})
		if err != nil {
			t.Fatal(err)
		}
		return img, c, time.Since(start)
	}
	home := t.TempDir()
	a, contents, took := build(home)
	b, again, _ := build(t.TempDir())
	if a.ManifestDigest != b.ManifestDigest || a.ConfigDigest != b.ConfigDigest {
		t.Fatalf("two builds from the same .deb files differ: %s/%s, %s/%s", a.ManifestDigest, a.ConfigDigest, b.ManifestDigest, b.ConfigDigest)
	}
	if len(contents.Debs) != len(again.Debs) {
		t.Fatalf("the second build took %d packages, the first %d", len(again.Debs), len(contents.Debs))
	}
	if _, err := image.Resolve(home, a.Ref); err != nil {
		t.Fatalf("Resolve(%s): %v", a.Ref, err)
	}
	want, err := exec.Command("apt-cache", "madison", "nodejs").Output()
	if err != nil {
		t.Fatal(err)
	}
	var nodejs debimage.Deb
	var names []string
	for _, d := range contents.Debs {
		names = append(names, d.Name+"="+d.Version)
		if d.Name == "nodejs" {
			nodejs = d
		}
	}
	if nodejs.Version == "" || !strings.Contains(string(want), "| "+nodejs.Version+" |") {
		t.Fatalf("nodejs %q is not a version an archive offers:\n%s", nodejs.Version, want)
	}
	if !strings.HasPrefix(strings.TrimPrefix(a.Name, "docker.io/"), Name) {
		t.Fatalf("image name %q", a.Name)
	}
	t.Logf("%s\nbuild %v; %d entries, %d regular files, %d bytes; packages %v; not followed %v",
		a.Ref, took.Round(time.Millisecond), contents.Entries, contents.Files, contents.Bytes, names, contents.Skipped)

	if os.Geteuid() != 0 {
		t.Skip("running inside the rootfs (chroot, mount namespace) needs root")
	}
	t.Run("node runs in the rootfs", func(t *testing.T) {
		pack := t.TempDir()
		script := `import("node:fs").then(fs => { const u = require("undici"); console.log(JSON.stringify({v: process.version, uid: process.getuid(), s: fs.readFileSync("/pack/x.txt", "utf8"), undici: typeof u.fetch, icu: new Intl.NumberFormat("de-DE").format(1234.5), crypto: require("node:crypto").createHash("sha256").update("a").digest("hex").slice(0, 8)})) })`
		if err := os.WriteFile(filepath.Join(pack, "x.txt"), []byte("from the pack"), 0o644); err != nil {
			t.Fatal(err)
		}
		// Debian's node: the upstream version of the package (18.20.4
		// for 18.20.4+dfsg-1~deb12u3).
		upstream, _, _ := strings.Cut(nodejs.Version, "+")
		upstream, _, _ = strings.Cut(upstream, "-")
		out, stderr := inRootfs(t, a.Rootfs, pack, "", Interpreter, "-e", script)
		want := `{"v":"v` + upstream + `","uid":1000,"s":"from the pack","undici":"function","icu":"1.234,5","crypto":"ca978112"}` + "\n"
		if out != want {
			t.Fatalf("stdout %q, want %q\nstderr %s", out, want, stderr)
		}
	})

	t.Run("tampered rootfs refused", func(t *testing.T) {
		node := filepath.Join(a.Rootfs, "usr/bin/node")
		data, err := os.ReadFile(node)
		if err != nil {
			t.Fatal(err)
		}
		restore := func() {
			_ = os.Chmod(node, 0o755)
			if err := os.WriteFile(node, data, 0o755); err != nil {
				t.Fatal(err)
			}
			_ = os.Chmod(node, 0o555)
		}
		// A byte of the interpreter changed (same size).
		if err := os.Chmod(node, 0o755); err != nil {
			t.Fatal(err)
		}
		changed := bytes.Clone(data)
		changed[len(changed)/2] ^= 0xff
		if err := os.WriteFile(node, changed, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(node, 0o555)
		_, err = image.Resolve(home, a.Ref)
		restore()
		if !errors.Is(err, reason.ErrImageDigestMismatch) {
			t.Fatalf("a changed byte of node: %v, want image_digest_mismatch", err)
		}
		if _, err := image.Resolve(home, a.Ref); err != nil {
			t.Fatalf("restored: %v", err)
		}
		// A file added to the JavaScript modules node loads.
		dir := filepath.Join(a.Rootfs, "usr/share/nodejs")
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		extra := filepath.Join(dir, "evil.js")
		if err := os.WriteFile(extra, []byte("module.exports = 1\n"), 0o444); err != nil {
			t.Fatal(err)
		}
		_, err = image.Resolve(home, a.Ref)
		_ = os.Remove(extra)
		_ = os.Chmod(dir, 0o555)
		if !errors.Is(err, reason.ErrImageDigestMismatch) {
			t.Fatalf("a file added: %v, want image_digest_mismatch", err)
		}
		if _, err := image.Resolve(home, a.Ref); err != nil {
			t.Fatalf("restored: %v", err)
		}
	})
}

// inRootfs runs argv chrooted into rootfs as uid/gid 1000 in a mount
// namespace of its own (util-linux unshare), with pack bound read-only at
// /pack, and returns stdout and stderr; a non-zero exit fails the test.
func inRootfs(t *testing.T, rootfs, pack, stdin string, argv ...string) (string, string) {
	t.Helper()
	script := `set -e; mount --bind "$1" "$2/pack"; mount -o remount,bind,ro "$2/pack"; shift; exec chroot --userspec=1000:1000 "$@"`
	args := append([]string{"--mount", "--propagation", "private", "/bin/sh", "-c", script, "sh", pack, rootfs}, argv...)
	cmd := exec.Command("unshare", args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	cmd.Dir = "/"
	cmd.Stdin = strings.NewReader(stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v in %s: %v\n%s", argv, rootfs, err, errb.String())
	}
	return out.String(), errb.String()
}

// TestNodeInstallerImage builds the Node installer image twice, into two
// homes, from the same downloaded .deb files, and requires the same
// digests, Debian's npm among its packages, and `npm --version` to print
// that package's upstream version when run in the unpacked rootfs as uid
// 1000 (HOME a private directory, nothing of the host visible).
func TestNodeInstallerImage(t *testing.T) {
	needArchive(t)
	base := baseOptions(t)
	cache := t.TempDir()
	home := t.TempDir()
	start := time.Now()
	a, contents, err := BuildInstaller(context.Background(), home, Options{Base: base, DebCache: cache})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	b, _, err := BuildInstaller(context.Background(), t.TempDir(), Options{Base: base, DebCache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if a.ManifestDigest != b.ManifestDigest || a.ConfigDigest != b.ConfigDigest {
		t.Fatalf("two builds from the same .deb files differ: %s/%s, %s/%s", a.ManifestDigest, a.ConfigDigest, b.ManifestDigest, b.ConfigDigest)
	}
	if !strings.HasPrefix(strings.TrimPrefix(a.Name, "docker.io/"), InstallerName) {
		t.Fatalf("image name %q", a.Name)
	}
	if _, err := image.Resolve(home, a.Ref); err != nil {
		t.Fatalf("Resolve(%s): %v", a.Ref, err)
	}
	var npm debimage.Deb
	for _, d := range contents.Debs {
		if d.Name == "npm" {
			npm = d
		}
	}
	if npm.Version == "" {
		t.Fatalf("no npm among the %d packages", len(contents.Debs))
	}
	t.Logf("%s\nbuild %v; %d packages, %d entries, %d regular files, %d bytes; npm %s",
		a.Ref, took.Round(time.Millisecond), len(contents.Debs), contents.Entries, contents.Files, contents.Bytes, npm.Version)
	if os.Geteuid() != 0 {
		t.Skip("running inside the rootfs (chroot, mount namespace) needs root")
	}
	// 9.2.0 for 9.2.0~ds1-1.
	upstream, _, _ := strings.Cut(npm.Version, "+")
	upstream, _, _ = strings.Cut(upstream, "-")
	upstream, _, _ = strings.Cut(upstream, "~")
	out, stderr := inRootfs(t, a.Rootfs, t.TempDir(), "", "/usr/bin/env", "HOME=/tmp", "PATH=/bin:/usr/bin", NPM, "--version")
	if strings.TrimSpace(out) != upstream {
		t.Fatalf("npm --version: %q, want %q (Debian's %s)\nstderr %s", out, upstream, npm.Version, stderr)
	}
}
