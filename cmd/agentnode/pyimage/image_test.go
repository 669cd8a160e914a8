package pyimage

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentnode/agentnode/cmd/agentnode/imagebuild"
	"github.com/agentnode/agentnode/executor/toolio"
	"github.com/agentnode/agentnode/kernel/image"
	"github.com/agentnode/agentnode/sdk/python"
)

// needHostPython skips unless this host has Debian's python3 in its dpkg
// database (what the image is built from); in CI it fails instead.
func needHostPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/var/lib/dpkg/info/python3-minimal.list"); err != nil {
		if os.Getenv("AGENTNODE_REQUIRE_PYTHON") == "1" {
			t.Fatalf("python3-minimal is not installed: %v", err)
		}
		t.Skipf("python3-minimal is not installed: %v", err)
	}
}

// pybuild builds the image with the pybuild command, compiled without the
// race detector (which makes compress/flate over 50 MB take many minutes),
// and returns it with the build's wall and CPU time.
func pybuild(t *testing.T, bin, home string, base imagebuild.BuildOptions, flags ...string) (*image.Image, *Contents, time.Duration, time.Duration) {
	t.Helper()
	args := append([]string{"-home", home, "-busybox", base.BusyboxPath, "-forwarder", base.ForwarderPath}, flags...)
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pybuild %v: %v\n%s", flags, err, stderr.String())
	}
	wall := time.Since(start)
	var res struct {
		Image    *image.Image `json:"image"`
		Contents *Contents    `json:"contents"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.Image == nil || res.Contents == nil {
		t.Fatalf("pybuild printed %s: %v", out, err)
	}
	return res.Image, res.Contents, wall, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// TestPythonImage builds the Python runtime image from this host's
// packages twice, into two homes, and requires the same digests; it reports
// the build's time and the image's sizes; then it runs the interpreter
// inside the unpacked rootfs as uid 1000 (chroot, nothing of the host
// visible) and the shim on a test package mounted at /pack, and requires
// the answers the host's interpreter gives.
func TestPythonImage(t *testing.T) {
	needHostPython(t)
	base := baseOptions(t)
	bin := filepath.Join(t.TempDir(), "pybuild")
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	if out, err := exec.Command(goTool, "build", "-o", bin, "./pybuild").CombinedOutput(); err != nil {
		t.Fatalf("go build ./pybuild: %v\n%s", err, out)
	}

	home := t.TempDir()
	a, contents, buildWall, buildCPU := pybuild(t, bin, home, base)
	b, _, _, _ := pybuild(t, bin, t.TempDir(), base)
	if a.ManifestDigest != b.ManifestDigest || a.ConfigDigest != b.ConfigDigest {
		t.Fatalf("two builds from the same packages differ: %s/%s, %s/%s", a.ManifestDigest, a.ConfigDigest, b.ManifestDigest, b.ConfigDigest)
	}
	if _, err := image.Resolve(home, a.Ref); err != nil {
		t.Fatalf("Resolve(%s): %v", a.Ref, err)
	}
	layer := layerSize(t, a)
	unpacked, n := treeSize(t, a.Rootfs)
	var pkgs []string
	for _, p := range contents.Packages {
		pkgs = append(pkgs, p.Name+"="+p.Version)
	}
	t.Logf("%s\nbuild: %v wall, %v CPU; layer %d bytes compressed, rootfs %d bytes in %d entries (%d regular files from the packages and the shim, %d bytes); packages %v; not followed %v",
		a.Ref, buildWall.Round(time.Millisecond), buildCPU.Round(time.Millisecond), layer, unpacked, n,
		contents.Files, contents.Bytes, pkgs, contents.Skipped)

	if os.Geteuid() != 0 {
		t.Skip("running inside the rootfs (chroot, mount namespace) needs root")
	}
	rootfs := a.Rootfs

	t.Run("stdlib modules load", func(t *testing.T) {
		// Every extension module of the standard library loads: the
		// shared libraries of the dependency closure are all there.
		script := `import json, ssl, sqlite3, asyncio, ctypes, decimal, lzma, bz2, zlib, uuid, hashlib, readline, curses, dbm.ndbm, pyexpat, zoneinfo, _ctypes, multiprocessing, mmap
import os, sys
dynload = os.path.join(sys.base_prefix, "lib", "python%d.%d" % sys.version_info[:2], "lib-dynload")
import importlib, warnings
warnings.simplefilter("ignore")
for f in sorted(os.listdir(dynload)):
    if f.endswith(".so") and not f.startswith(("_test", "xx", "_xx", "_ctypes_test")):
        importlib.import_module(f.split(".")[0])
print(ssl.OPENSSL_VERSION.split()[0], sqlite3.sqlite_version_info[0], os.getuid(), sys.version_info[:2] == (%d, %d))`
		ver := hostPythonVersion(t)
		out, stderr := inRootfs(t, rootfs, "", "", python.Interpreter, "-I", "-S", "-B", "-c", strings.Replace(script, "(%d, %d)", ver, 1))
		if out != "OpenSSL 3 1000 True\n" {
			t.Fatalf("stdout %q, stderr %s", out, stderr)
		}
	})

	t.Run("standard library bytecode", func(t *testing.T) {
		// The image's interpreter, which cannot write bytecode, loads
		// the standard library's compiled modules instead of compiling
		// them on every start.
		if contents.Bytecode < 100 {
			t.Fatalf("%d compiled modules in the image", contents.Bytecode)
		}
		_, stderr := inRootfs(t, rootfs, "", "", python.Interpreter, "-I", "-S", "-B", "-v", "-c", "import json")
		if !strings.Contains(stderr, "# code object from '/usr/lib/python3") || !strings.Contains(stderr, "/json/__pycache__/__init__.") {
			t.Fatalf("json was not loaded from its bytecode:\n%s", stderr)
		}
		// The tool shim too, imported as python.ImageCommand does.
		_, stderr = inRootfs(t, rootfs, "", "", python.Interpreter, "-I", "-S", "-B", "-v", "-c",
			`import sys; sys.path.insert(0, "/usr/lib/agentnode"); import agentnode_tool`)
		if !strings.Contains(stderr, "# code object from '/usr/lib/agentnode/__pycache__/agentnode_tool.") {
			t.Fatalf("the shim was not loaded from its bytecode:\n%s", stderr)
		}
	})

	t.Run("shim", func(t *testing.T) {
		packs, err := filepath.Abs("../../../sdk/python/testdata")
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct{ pack, entrypoint, input string }{
			{"probe-pack", "probe_pack.tool:chatty", `{"n":2}`},
			{"probe-pack", "probe_pack.tool:slow_echo", `{"value":{"k":"\u00e9"}}`},
			{"probe-pack", "probe_pack.tool:tags", `{}`},
			{"probe-pack", "probe_pack.tool:explode", `{"message":"no"}`},
			{"probe-pack", "probe_pack.broken:run", `{}`},
			{"text-stats-pack", "text_stats_pack.tool", `{"text":"b a b"}`},
			{"flat-notes-pack", "flat_notes_pack.tool:format_note", `{"title":"In the Image"}`},
		}
		shim := filepath.Join(t.TempDir(), "agentnode_tool.py")
		if err := os.WriteFile(shim, python.Shim, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, tc := range cases {
			if _, err := os.Stat(filepath.Join(packs, tc.pack, "agentnode.yaml")); err != nil {
				t.Fatalf("test pack %s: %v", tc.pack, err)
			}
			req, err := toolio.EncodeRequest("t", json.RawMessage(tc.input))
			if err != nil {
				t.Fatal(err)
			}
			// Expected: the same shim on the host's interpreter, whose
			// answers shim_test.go compares with direct calls.
			host := exec.Command("/usr/bin/python3", python.Command("/usr/bin/python3", shim, filepath.Join(packs, tc.pack), tc.entrypoint, false)[1:]...)
			host.Env = []string{"PATH=/usr/bin:/bin"}
			host.Dir = t.TempDir()
			host.Stdin = bytes.NewReader(req)
			want, err := host.Output()
			if err != nil {
				t.Fatalf("%s on the host: %v", tc.entrypoint, err)
			}
			got, stderr := inRootfs(t, rootfs, filepath.Join(packs, tc.pack), string(req),
				python.ImageCommand("/pack", tc.entrypoint, false)...)
			if got != string(want) {
				t.Errorf("%s in the image: %s\nhost: %s\nstderr: %s", tc.entrypoint, got, want, stderr)
			}
			if _, err := toolio.DecodeResponse([]byte(got)); err != nil {
				t.Errorf("%s: %v", tc.entrypoint, err)
			}
		}
	})
}

// TestPythonInstallerImage builds the Python installer image twice, into
// two homes, and requires the same digests and pip's modules compiled into
// unchecked hash-based bytecode; as root, pip inside the unpacked rootfs
// loads its modules from that bytecode (the image's interpreter cannot
// write any) and answers.
func TestPythonInstallerImage(t *testing.T) {
	needHostPython(t)
	if _, err := os.Stat("/var/lib/dpkg/info/python3-pip.list"); err != nil {
		if os.Getenv("AGENTNODE_REQUIRE_PYTHON") == "1" {
			t.Fatalf("python3-pip is not installed: %v", err)
		}
		t.Skipf("python3-pip is not installed: %v", err)
	}
	base := baseOptions(t)
	bin := filepath.Join(t.TempDir(), "pybuild")
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	if out, err := exec.Command(goTool, "build", "-o", bin, "./pybuild").CombinedOutput(); err != nil {
		t.Fatalf("go build ./pybuild: %v\n%s", err, out)
	}
	build := func(home string) (*image.Image, *Contents, time.Duration, time.Duration) {
		return pybuild(t, bin, home, base, "-installer")
	}
	a, contents, wall, cpu := build(t.TempDir())
	b, _, _, _ := build(t.TempDir())
	if a.ManifestDigest != b.ManifestDigest || a.ConfigDigest != b.ConfigDigest {
		t.Fatalf("two builds from the same packages differ: %s/%s, %s/%s", a.ManifestDigest, a.ConfigDigest, b.ManifestDigest, b.ConfigDigest)
	}
	if contents.DistBytecode < 100 || contents.Bytecode-contents.DistBytecode < 100 {
		t.Fatalf("%d compiled modules in the image, %d of them in dist-packages", contents.Bytecode, contents.DistBytecode)
	}
	unpacked, n := treeSize(t, a.Rootfs)
	t.Logf("%s\nbuild: %v wall, %v CPU; layer %d bytes compressed, rootfs %d bytes in %d entries, %d regular files (%d .pyc, %d of them in dist-packages)",
		a.Ref, wall.Round(time.Millisecond), cpu.Round(time.Millisecond), layerSize(t, a), unpacked, n,
		contents.Files, contents.Bytecode, contents.DistBytecode)
	var pyc []string
	err = filepath.WalkDir(filepath.Join(a.Rootfs, "usr", "lib", "python3", "dist-packages", "pip", "_internal", "__pycache__"),
		func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".pyc") {
				pyc = append(pyc, p)
			}
			return err
		})
	if err != nil || len(pyc) == 0 {
		t.Fatalf("no bytecode of pip._internal in the rootfs: %v", err)
	}
	data, err := os.ReadFile(pyc[0])
	// PEP 552: the flags word after the magic number is 1 for an
	// unchecked hash-based .pyc (bytecode.go says why unchecked).
	if err != nil || len(data) < 16 || data[4] != 1 || data[5] != 0 || data[6] != 0 || data[7] != 0 {
		t.Fatalf("%s is not an unchecked hash-based .pyc: % x (%v)", pyc[0], data[:min(len(data), 16)], err)
	}

	if os.Geteuid() != 0 {
		t.Skip("running inside the rootfs (chroot, mount namespace) needs root")
	}
	out, stderr := inRootfs(t, a.Rootfs, "", "", python.Interpreter, "-I", "-B", "-v", "-m", "pip", "--version")
	if !strings.HasPrefix(out, "pip ") {
		t.Fatalf("pip --version: stdout %q, stderr %s", out, stderr)
	}
	if !strings.Contains(stderr, "# code object from '/usr/lib/python3/dist-packages/pip/_internal/__pycache__/") {
		t.Fatalf("pip was not loaded from its bytecode:\n%s", stderr)
	}
	if strings.Contains(stderr, "# code object from /usr/lib/python3/dist-packages/pip/") { // how -v names a compiled source
		t.Fatalf("pip's modules were compiled from source:\n%s", stderr)
	}
}

func hostPythonVersion(t *testing.T) string {
	out, err := exec.Command("/usr/bin/python3", "-I", "-c", "import sys; print('%d, %d' % sys.version_info[:2])").Output()
	if err != nil {
		t.Fatal(err)
	}
	return "(" + strings.TrimSpace(string(out)) + ")"
}

// inRootfs runs argv chrooted into rootfs as uid/gid 1000 in a mount
// namespace of its own (util-linux unshare), with pack bound read-only at
// /pack when given, and returns stdout and stderr; a non-zero exit fails
// the test.
func inRootfs(t *testing.T, rootfs, pack, stdin string, argv ...string) (string, string) {
	t.Helper()
	script := `set -e; if [ -n "$1" ]; then mount --bind "$1" "$2/pack"; mount -o remount,bind,ro "$2/pack"; fi; shift; exec chroot --userspec=1000:1000 "$@"`
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

func layerSize(t *testing.T, img *image.Image) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(filepath.Join(img.Layout, "blobs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil && fi.Size() > 1<<20 {
			total += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

func treeSize(t *testing.T, dir string) (int64, int) {
	t.Helper()
	var size int64
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		n++
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			size += fi.Size()
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return size, n
}
