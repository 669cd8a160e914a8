package main

// These tests use no keychain: the lockfiles stay unsealed (sealing is
// covered by test/testdata/script/lockfile.txtar under test/keyring.sh).

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/lockedit"
	"github.com/agentnode/agentnode/kernel/lockfile"
	"github.com/agentnode/agentnode/kernel/reason"
)

const lockSecret = "sk-live-SECRETMARKER42"

// lockPackage writes a valid package source directory.
func lockPackage(t *testing.T, id, version string) string {
	t.Helper()
	dir := t.TempDir()
	m := "manifest_version: \"0.2\"\npackage_id: " + id + "\npackage_type: toolpack\nname: Demo\npublisher: acme\n" +
		"version: " + version + "\nsummary: demo\nruntime: exec\ncapabilities:\n  tools:\n    - name: echo\n" +
		"      description: Echo.\n      entrypoint: bin/echo\n      input_schema: {type: object}\n" +
		"permissions:\n  network: {level: none}\n  filesystem: {level: none}\n  code_execution: {level: none}\n"
	if err := os.WriteFile(filepath.Join(dir, "agentnode.yaml"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "echo"), []byte("#!/bin/sh\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func lockEnv(t *testing.T) string {
	t.Helper()
	trustHome(t)
	path := filepath.Join(t.TempDir(), "agentnode.lock")
	t.Setenv("AGENTNODE_LOCKFILE", path)
	return path
}

func verifyJSON(t *testing.T, args ...string) (int, verifyOutput) {
	t.Helper()
	code, out, errOut := runCLI(t, append([]string{"lock", "verify", "--json"}, args...)...)
	var v verifyOutput
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("verify --json output %q (stderr %s): %v", out, errOut, err)
	}
	return code, v
}

func TestLockInstallVerifyRemove(t *testing.T) {
	path := lockEnv(t)

	// No lockfile: 0 with a warning, 1 in strict mode.
	if code, v := verifyJSON(t); code != 0 || v.Exists || !v.OK || len(v.Warnings) != 1 {
		t.Fatalf("no lockfile: exit %d %+v", code, v)
	}
	if code, v := verifyJSON(t, "--strict"); code != reason.ExitFailed || v.OK {
		t.Fatalf("no lockfile, strict: exit %d %+v", code, v)
	}
	if code, _, errOut := runCLI(t, "lock", "seal"); code != reason.ExitUsage || !strings.Contains(errOut, "no lockfile") {
		t.Fatalf("seal without lockfile: exit %d %s", code, errOut)
	}

	for _, p := range []struct{ id, version string }{{"one-tools", "1.0.0"}, {"two-tools", "2.1.0"}} {
		if code, out, errOut := runCLI(t, "install", lockPackage(t, p.id, p.version)); code != 0 {
			t.Fatalf("install %s: exit %d %s %s", p.id, code, out, errOut)
		}
	}
	d, err := lockfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if e := d.Entry("two-tools"); e == nil || e.Get("version").Str != "2.1.0" || e.Get("trust_level") != nil {
		t.Fatalf("entry %s", lockfile.Indented(d.Packages()))
	}
	before, _ := os.ReadFile(path)
	code, v := verifyJSON(t)
	if code != 0 || !v.OK || len(v.Entries) != 2 || v.Structure.Status != lockfile.Verified || v.Seal.Status != lockfile.Missing {
		t.Fatalf("verify: exit %d %+v", code, v)
	}
	if code, v := verifyJSON(t, "--strict"); code != reason.ExitFailed || len(v.Problems) != 1 || !strings.Contains(v.Problems[0], "seal") {
		t.Fatalf("strict without seal: exit %d %+v", code, v)
	}

	// Re-installing one package keeps the other's entry as it was.
	other, _ := lockfile.Parse(before)
	if code, _, errOut := runCLI(t, "install", lockPackage(t, "one-tools", "1.1.0")); code != 0 {
		t.Fatalf("re-install: %s", errOut)
	}
	d, _ = lockfile.Load(path)
	if !bytes.Equal(lockfile.Indented(d.Entry("two-tools")), lockfile.Indented(other.Entry("two-tools"))) {
		t.Fatal("re-installing one-tools changed two-tools' entry")
	}
	if d.Entry("one-tools").Get("version").Str != "1.1.0" {
		t.Fatal("one-tools' entry not replaced")
	}

	if code, _, errOut := runCLI(t, "remove", "one-tools"); code != 0 {
		t.Fatalf("remove: %s", errOut)
	}
	d, _ = lockfile.Load(path)
	if d.Entry("one-tools") != nil || d.Entry("two-tools") == nil {
		t.Fatalf("after remove: %s", lockfile.Indented(d.Packages()))
	}
	if code, v := verifyJSON(t); code != 0 || !v.OK {
		t.Fatalf("verify after remove: exit %d %+v", code, v)
	}
}

// verify never writes, whatever it finds; a tampered entry is exit 1; seal
// refuses a lockfile that does not verify unless --force.
func TestLockVerifyMismatchReadOnly(t *testing.T) {
	path := lockEnv(t)
	if code, _, errOut := runCLI(t, "install", lockPackage(t, "one-tools", "1.0.0")); code != 0 {
		t.Fatal(errOut)
	}
	d, _ := lockfile.Load(path)
	d.Entry("one-tools").Set("runtime", lockfile.Str("python"))
	if err := lockedit.WriteFile(path, d); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	fi, _ := os.Stat(path)
	code, v := verifyJSON(t)
	if code != reason.ExitFailed || v.OK || len(v.Entries) != 1 || v.Entries[0].Status != lockfile.Mismatch {
		t.Fatalf("verify: exit %d %+v", code, v)
	}
	code, out, errOut := runCLI(t, "lock", "verify")
	if code != reason.ExitFailed || !strings.Contains(out, "FAILED") || !strings.Contains(errOut, "package one-tools: mismatch") {
		t.Fatalf("text verify: exit %d\n%s\n%s", code, out, errOut)
	}
	after, _ := os.ReadFile(path)
	fi2, _ := os.Stat(path)
	if !bytes.Equal(before, after) || !fi.ModTime().Equal(fi2.ModTime()) {
		t.Fatal("verify changed the lockfile")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("verify left files next to the lockfile: %v", entries)
	}
	// seal (no seal yet, so no keychain is needed to refuse) refuses.
	code, _, errOut = runCLI(t, "lock", "seal")
	if code != reason.ExitFailed || !strings.Contains(errOut, "was not sealed") || !strings.Contains(errOut, "--force") {
		t.Fatalf("seal of a mismatching lockfile: exit %d %s", code, errOut)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(before, again) {
		t.Fatal("a refused seal changed the lockfile")
	}
	// install of another package refuses before changing anything.
	code, _, errOut = runCLI(t, "install", lockPackage(t, "two-tools", "1.0.0"))
	if code != reason.ExitUsage || !strings.Contains(errOut, "lockfile_error") {
		t.Fatalf("install with a mismatching lockfile: exit %d %s", code, errOut)
	}
	if _, out, _ := runCLI(t, "list"); strings.Contains(out, "two-tools") {
		t.Fatal("the package was installed although the lockfile could not be updated")
	}
}

func TestLockCorruptLeaksNothing(t *testing.T) {
	path := lockEnv(t)
	docs := []string{
		`{"lockfile_version":"0.1","packages":{"` + lockSecret + `":{},"` + lockSecret + `":{}}}`,
		`{"lockfile_version":"0.1","packages":{"p-one":{"version":["` + lockSecret + `"]}}}`,
		`{"lockfile_version":"0.1","packages":{` + lockSecret,
	}
	for _, doc := range docs {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"lock", "verify"}, {"lock", "verify", "--json"}, {"lock", "verify", "--strict"}} {
			code, out, errOut := runCLI(t, args...)
			if code != reason.ExitFailed {
				t.Fatalf("%v on %s: exit %d", args, doc, code)
			}
			if strings.Contains(out+errOut, "SECRET") {
				t.Fatalf("%v leaks content:\n%s\n%s", args, out, errOut)
			}
		}
		code, out, errOut := runCLI(t, "install", lockPackage(t, "one-tools", "1.0.0"))
		if code != reason.ExitUsage || strings.Contains(out+errOut, "SECRET") {
			t.Fatalf("install with a corrupt lockfile: exit %d\n%s\n%s", code, out, errOut)
		}
		if got, _ := os.ReadFile(path); string(got) != doc {
			t.Fatal("the corrupt lockfile was changed")
		}
	}
}
