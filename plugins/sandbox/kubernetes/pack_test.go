package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadPack: every regular file becomes one key, projected at its
// path with its executable bit, and the manifest names its digest.
func TestReadPack(t *testing.T) {
	dir := writePack(t, map[string]string{"tool.sh": "echo hi\n", "lib/data.txt": "data\n"})
	p, err := readPack(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.items) != 2 || len(p.data) != 2 {
		t.Fatalf("items %v", p.items)
	}
	modes := map[string]int32{}
	for _, it := range p.items {
		modes[it.Path] = *it.Mode
		if string(p.data[it.Key]) == "" {
			t.Errorf("key %s has no data", it.Key)
		}
	}
	if modes["tool.sh"] != 0o555 || modes["lib/data.txt"] != 0o444 {
		t.Errorf("modes %v", modes)
	}
	sum := sha256.Sum256([]byte("data\n"))
	if !strings.Contains(p.manifest, hex.EncodeToString(sum[:])+"  ./lib/data.txt\n") {
		t.Errorf("manifest:\n%s", p.manifest)
	}
}

// TestReadPackRefuses: a package over MaxPackageBytes, a symlink and a
// file name with a newline are refused with their reasons.
func TestReadPackRefuses(t *testing.T) {
	big := writePack(t, map[string]string{"blob": strings.Repeat("x", MaxPackageBytes)})
	if _, err := readPack(big); !errors.Is(err, ErrPackageTooLarge) {
		t.Errorf("large package: %v; want %v", err, ErrPackageTooLarge)
	}
	link := writePack(t, map[string]string{"tool.sh": "x"})
	if err := os.Symlink("/etc/shadow", filepath.Join(link, "shadow")); err != nil {
		t.Fatal(err)
	}
	if _, err := readPack(link); !errors.Is(err, ErrPackageShape) {
		t.Errorf("symlink: %v; want %v", err, ErrPackageShape)
	}
	nl := writePack(t, map[string]string{"a\nb": "x"})
	if _, err := readPack(nl); !errors.Is(err, ErrPackageShape) {
		t.Errorf("newline: %v; want %v", err, ErrPackageShape)
	}
}

// TestConfig: the file's keys, defaults and refusals.
func TestConfig(t *testing.T) {
	c, err := parseConfig([]byte(`{"kubeconfig": "/etc/k.conf", "runtime_class": "gvisor", "node_selector": {"pool": "agents"}}`))
	if err != nil || c.Namespace != "default" || c.RuntimeClass != "gvisor" || c.NodeSelector["pool"] != "agents" {
		t.Fatalf("parseConfig = %+v, %v", c, err)
	}
	for _, bad := range []string{
		`{"kubeconfig": "rel/k.conf"}`,
		`{"kubeconfig": "/k", "namespace": "Bad_NS"}`,
		`{"kubeconfig": "/k", "unknown": 1}`,
		`{"kubeconfig": "/k", "node_selector": {"a": "b c"}}`,
	} {
		if _, err := parseConfig([]byte(bad)); !errors.Is(err, ErrConfig) {
			t.Errorf("parseConfig(%s) = %v; want %v", bad, err, ErrConfig)
		}
	}
	// The file next to the binary: group-writable is refused.
	exe := filepath.Join(t.TempDir(), "agentnode-sandbox-kubernetes")
	if err := os.WriteFile(exe+".json", []byte(`{"kubeconfig": "/k"}`), 0o620); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(exe+".json", 0o620); err != nil {
		t.Fatal(err)
	}
	if _, err := configFor(exe); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "writable") {
		t.Errorf("group-writable config: %v", err)
	}
	if err := os.Chmod(exe+".json", 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := configFor(exe); err != nil || c.Kubeconfig != "/k" {
		t.Errorf("configFor = %+v, %v", c, err)
	}
	if _, err := configFor(filepath.Join(t.TempDir(), "none")); !errors.Is(err, ErrConfig) {
		t.Errorf("missing config: %v", err)
	}
}
