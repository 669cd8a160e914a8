package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/sdk/sandbox/profile"
	"github.com/agentnode/agentnode/sdk/sandbox/sandboxtest"
)

// podmanDefaultSeccomp is where Debian's podman keeps its default profile.
const podmanDefaultSeccomp = "/usr/share/containers/seccomp.json"

// TestUnshareUserOnlyRefusedByOurProfile is the reason the backend passes our own seccomp profile, measured
// with the suite's probe from inside the container: with every flag of
// the backend but podman's default seccomp profile, unshare(CLONE_NEWUSER)
// succeeds (the sandbox does not hold); with the backend's profile (the
// sandbox profile's own filter) it is refused. So the suite's
// sys-unshare-user check passes because of our filter, not by luck.
func TestUnshareUserOnlyRefusedByOurProfile(t *testing.T) {
	b, fx := setup(t)
	if _, err := os.Stat(podmanDefaultSeccomp); err != nil {
		skipOrFail(t, "podman's default seccomp profile: %v", err)
	}
	e, err := b.engine(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	pack := t.TempDir()
	if err := os.Chmod(pack, 0o755); err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(pack, "probe")
	build := exec.Command(goTool(), "build", "-trimpath", "-o", probe, sandboxtest.ProbePackage)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, out)
	}

	run := func(seccompFile string) (bool, string) {
		t.Helper()
		id := newID(t, "seccomp")
		run := spec(fx, id, "/pack/probe", "sys-unshare-user")
		run.PackageDir = pack
		s, err := profile.ForRun(run)
		if err != nil {
			t.Fatal(err)
		}
		nonce := randomHex(16)
		cidfile := filepath.Join(e.stateDir, "cid-"+nonce)
		defer os.Remove(cidfile)
		args, err := runArgs(s, runParams{runID: id, nonce: nonce, imageID: strings.TrimPrefix(fx.Img.ConfigDigest, "sha256:"),
			cidfile: cidfile, seccompFile: seccompFile, cgroupParent: b.cgroupParent})
		if err != nil {
			t.Fatal(err)
		}
		args[slices.Index(args, "--rm=false")] = "--rm"
		var stdout, stderr bytes.Buffer
		cmd := e.command(args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("podman run: %v\n%s", err, stderr.String())
		}
		var r struct {
			OK     bool   `json:"ok"`
			Detail string `json:"detail"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &r); err != nil {
			t.Fatalf("probe output %q: %v", stdout.String(), err)
		}
		return r.OK, r.Detail
	}

	held, detail := run(podmanDefaultSeccomp)
	t.Logf("podman's default profile: held=%v: %s", held, detail)
	if held {
		t.Logf("unshare(CLONE_NEWUSER) is refused even under podman's default profile here (user namespaces disabled?): the comparison proves nothing on this host")
	}
	held, detail = run(e.seccompFile)
	t.Logf("the backend's profile: held=%v: %s", held, detail)
	if !held {
		t.Fatalf("unshare(CLONE_NEWUSER) succeeded under the backend's seccomp profile: %s", detail)
	}
}
