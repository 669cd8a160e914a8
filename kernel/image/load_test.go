package image

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// usableEngine returns the engine's CLI when the engine works here. It
// skips otherwise, unless AGENTNODE_REQUIRE_DOCKER=1 / AGENTNODE_REQUIRE_PODMAN=1,
// which turn the skip into a failure.
func usableEngine(t *testing.T, engine string) string {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("AGENTNODE_REQUIRE_"+strings.ToUpper(engine)) == "1" {
		skip = t.Fatalf
	}
	bin, err := EngineCLI(engine)
	if err != nil {
		skip("%s: %v", engine, err)
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, "info").CombinedOutput(); err != nil {
		skip("%s info: %v: %s", engine, err, strings.TrimSpace(string(out)))
	}
	return bin
}

func TestLoad(t *testing.T) {
	bb := hostBusybox(t)
	for _, engine := range Engines {
		t.Run(engine, func(t *testing.T) {
			usableEngine(t, engine)
			h := t.TempDir()
			img := build(t, h, bb)
			if err := Load(img, engine); err != nil {
				t.Fatalf("Load: %v", err)
			}
			// Loading the same image again is fine.
			if err := Load(img, engine); err != nil {
				t.Fatalf("second Load: %v", err)
			}
			ok, err := Present(img, engine)
			if err != nil || !ok {
				t.Fatalf("Present after Load = %v, %v", ok, err)
			}
			other := *img
			other.ConfigDigest = "sha256:" + strings.Repeat("ab", 32)
			if ok, err := Present(&other, engine); err != nil || ok {
				t.Errorf("Present(unknown image) = %v, %v", ok, err)
			}
			id, err := inspectID(mustCLI(t, engine), img.Tag())
			if err != nil || id != img.ConfigDigest {
				t.Errorf("%s reports ID %s for %s (%v), want %s", engine, id, img.Tag(), err, img.ConfigDigest)
			}
		})
	}
}

func mustCLI(t *testing.T, engine string) string {
	t.Helper()
	bin, err := EngineCLI(engine)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestLoadRefusesTamperedLayer(t *testing.T) {
	img := build(t, t.TempDir(), hostBusybox(t))
	m := manifestOf(t, img)
	p := blobPath(img.Layout, m.Layers[0].Digest.Hex)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := verifiedImage(img); err == nil || !strings.Contains(err.Error(), "modified") {
		t.Fatalf("verifiedImage with a changed layer = %v", err)
	}
}

func TestEngineCLI(t *testing.T) {
	if _, err := EngineCLI("lxc"); err == nil || errors.Is(err, ErrEngineNotInstalled) {
		t.Errorf("EngineCLI(lxc) = %v, want an unknown-engine error", err)
	}
	t.Setenv("PATH", t.TempDir())
	for _, e := range Engines {
		if _, err := EngineCLI(e); !errors.Is(err, ErrEngineNotInstalled) {
			t.Errorf("EngineCLI(%s) with an empty PATH = %v", e, err)
		}
		if err := Load(&Image{}, e); !errors.Is(err, ErrEngineNotInstalled) {
			t.Errorf("Load(%s) with an empty PATH = %v", e, err)
		}
	}
}
