package dispatch

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/auditverify"
	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/cmd/agentnode/lockedit"
	"github.com/agentnode/agentnode/cmd/agentnode/pkginstall"
	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/lockfile"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
)

const lockTestManifest = `manifest_version: "0.2"
package_id: lock-tools
package_type: toolpack
name: Lock tools
publisher: acme
version: 2.0.0
summary: For the lockfile stage tests.
runtime: exec
capabilities:
  tools:
    - name: echo
      description: Echo.
      entrypoint: bin/echo
      input_schema: {type: object}
permissions:
  network: {level: none}
  filesystem: {level: none}
  code_execution: {level: none}
`

const leakMarker = "sk-live-SECRETMARKER42"

var testSealKey = bytes.Repeat([]byte{0x42}, lockfile.KeySize)

// lockHome is a set-up home with lock-tools installed, a lockfile path in
// AGENTNODE_LOCKFILE (not yet written) and a fixed seal key.
func lockHome(t *testing.T, strict bool) (*Kernel, *store.Package, string) {
	t.Helper()
	k := newHome(t)
	if strict {
		if err := configedit.Set(home.ConfigPath(k.HomeDir), "lockfile.strict", "true"); err != nil {
			t.Fatal(err)
		}
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "agentnode.yaml"), []byte(lockTestManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(src, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "bin", "echo"), []byte("#!/bin/sh\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := pkginstall.Open(home.PackagesDir(k.HomeDir)).Install(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "agentnode.lock")
	t.Setenv("AGENTNODE_LOCKFILE", path)
	saved := loadSealKey
	loadSealKey = func(string) ([]byte, error) { return testSealKey, nil }
	t.Cleanup(func() { loadSealKey = saved })
	return k, p, path
}

// writeLock writes a lockfile with p's entry (trust_level level), another
// entry, and a seal if sealed; mutate runs before the digests and seal
// are computed unless late, in which case it runs after (tampering).
func writeLock(t *testing.T, path string, p *store.Package, level string, sealed bool, mutate func(d *lockfile.Document), late bool) {
	t.Helper()
	if err := (&lockedit.Updater{Path: path}).Put("other-pack", lockfile.Obj(
		lockfile.Member{Key: "version", Value: lockfile.Str("1.0.0")},
		lockfile.Member{Key: "artifact_hash", Value: lockfile.Str("sha256:" + strings.Repeat("ab", 32))},
	)); err != nil {
		t.Fatal(err)
	}
	e, err := lockedit.EntryFor(p, lockedit.EntryInfo{TrustLevel: level, Source: lockedit.SourceLocal})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&lockedit.Updater{Path: path}).Put(p.ID, e); err != nil {
		t.Fatal(err)
	}
	d, err := lockfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil && !late {
		mutate(d)
		for _, m := range d.Packages().Obj {
			m.Value.Set(lockfile.FieldIntegrity, lockedit.Integrity(m.Value))
		}
		d.Root.Set(lockfile.FieldStructureDigest, lockedit.StructureDigest(d))
	}
	if sealed {
		lockedit.Seal(d, testSealKey)
	}
	if mutate != nil && late {
		mutate(d)
	}
	if err := lockedit.WriteFile(path, d); err != nil {
		t.Fatal(err)
	}
}

// runLockStage runs config → lockfile → a stage that records it was
// reached and then refuses (so nothing executes), and returns the result,
// the error and whether the stage after the lockfile was reached.
func runLockStage(t *testing.T, k *Kernel, pkg string) (*Result, error, bool) {
	t.Helper()
	reached := false
	withStages(t,
		stage{name: "config", code: reason.ConfigInvalid, run: stageConfig},
		stage{name: "lockfile", code: reason.LockfileError, run: stageLockfile},
		stage{name: "after", code: reason.PolicyDenied, run: func(context.Context, *state) error {
			reached = true
			return reason.New(reason.PolicyDenied, "stopped after the lockfile stage")
		}})
	res, err := k.Run(context.Background(), &Request{Package: pkg, Tool: "echo"})
	return res, err, reached
}

func TestLockfileStrict(t *testing.T) {
	cases := []struct {
		name    string
		write   func(t *testing.T, path string, p *store.Package)
		allowed bool
		want    string
	}{
		{"sealed and matching", func(t *testing.T, path string, p *store.Package) {
			writeLock(t, path, p, "unknown", true, nil, false)
		}, true, ""},
		{"no lockfile", func(*testing.T, string, *store.Package) {}, false, "there is no lockfile"},
		{"not sealed", func(t *testing.T, path string, p *store.Package) {
			writeLock(t, path, p, "unknown", false, nil, false)
		}, false, "seal missing"},
		{"sealed with another key", func(t *testing.T, path string, p *store.Package) {
			writeLock(t, path, p, "unknown", false, func(d *lockfile.Document) { lockedit.Seal(d, bytes.Repeat([]byte{1}, lockfile.KeySize)) }, true)
		}, false, "seal mismatch"},
		{"trust_level promoted after sealing", func(t *testing.T, path string, p *store.Package) {
			writeLock(t, path, p, "unknown", true, func(d *lockfile.Document) {
				d.Entry("lock-tools").Set("trust_level", lockfile.Str("curated"))
				d.Root.Set(lockfile.FieldStructureDigest, lockedit.StructureDigest(d))
			}, true)
		}, false, "seal mismatch"},
		{"no entry for the package", func(t *testing.T, path string, p *store.Package) {
			writeLock(t, path, p, "unknown", true, func(d *lockfile.Document) { d.Packages().Delete("lock-tools") }, false)
		}, false, "no entry for this package"},
		{"entry for another version", func(t *testing.T, path string, p *store.Package) {
			writeLock(t, path, p, "unknown", true, func(d *lockfile.Document) { d.Entry("lock-tools").Set("version", lockfile.Str("1.9.0")) }, false)
		}, false, "another version, artifact_hash or deps_hash"},
		{"entry for another artifact", func(t *testing.T, path string, p *store.Package) {
			writeLock(t, path, p, "unknown", true, func(d *lockfile.Document) {
				d.Entry("lock-tools").Set("artifact_hash", lockfile.Str("sha256:"+strings.Repeat("00", 32)))
			}, false)
		}, false, "another version, artifact_hash or deps_hash"},
		{"entry naming dependencies the package has not", func(t *testing.T, path string, p *store.Package) {
			writeLock(t, path, p, "unknown", true, func(d *lockfile.Document) {
				d.Entry("lock-tools").Set(lockfile.FieldDepsHash, lockfile.Str("sha256:"+strings.Repeat("11", 32)))
			}, false)
		}, false, "another version, artifact_hash or deps_hash"},
		{"another entry tampered", func(t *testing.T, path string, p *store.Package) {
			writeLock(t, path, p, "unknown", true, func(d *lockfile.Document) { d.Entry("other-pack").Set("version", lockfile.Str(leakMarker)) }, true)
		}, false, "1 entry mismatch"},
		{"an entry without _integrity", func(t *testing.T, path string, p *store.Package) {
			writeLock(t, path, p, "unknown", false, func(d *lockfile.Document) {
				d.Entry("other-pack").Delete(lockfile.FieldIntegrity)
				d.Root.Set(lockfile.FieldStructureDigest, lockedit.StructureDigest(d))
				lockedit.Seal(d, testSealKey)
			}, true)
		}, false, "1 entry missing"},
		{"corrupt", func(t *testing.T, path string, _ *store.Package) {
			if err := os.WriteFile(path, []byte(`{"lockfile_version":"0.1","packages":{"`+leakMarker+`":1,"`+leakMarker+`":2}}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, false, "invalid lockfile"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, p, path := lockHome(t, true)
			c.write(t, path, p)
			before, _ := os.ReadFile(path)
			res, err, reached := runLockStage(t, k, p.ID)
			if c.allowed {
				if !reached {
					t.Fatalf("refused: %v", err)
				}
				if len(res.Warnings) != 0 {
					t.Fatalf("warnings %q", res.Warnings)
				}
				return
			}
			if reached {
				t.Fatal("a stage after the lockfile ran")
			}
			if !errors.Is(err, reason.ErrIntegrityDenied) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want integrity_denied with %q", err, c.want)
			}
			if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "other-pack") {
				t.Fatalf("the refusal quotes the lockfile: %v", err)
			}
			rec := lastRecord(t, k)
			if rec.Decision != "deny" || rec.Code != string(reason.IntegrityDenied) || strings.Contains(rec.Reason, "SECRET") {
				t.Fatalf("audit record %+v", rec)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatal("the run changed the lockfile")
			}
		})
	}
}

func TestLockfileNotStrictWarnsOnceAndAudits(t *testing.T) {
	cases := []struct {
		name  string
		write func(t *testing.T, path string, p *store.Package)
		warn  string // "" = no warning
	}{
		{"no lockfile", func(*testing.T, string, *store.Package) {}, ""},
		{"unsealed, verified", func(t *testing.T, path string, p *store.Package) {
			writeLock(t, path, p, "", false, nil, false)
		}, ""},
		{"no entry for the package", func(t *testing.T, path string, p *store.Package) {
			writeLock(t, path, p, "", false, func(d *lockfile.Document) { d.Packages().Delete("lock-tools") }, false)
		}, ""},
		{"sealed, key unreadable", func(t *testing.T, path string, p *store.Package) {
			writeLock(t, path, p, "", true, nil, false)
			loadSealKey = func(string) ([]byte, error) { return nil, errors.New("keychain locked") }
		}, ""},
		{"trust_level promoted after sealing", func(t *testing.T, path string, p *store.Package) {
			writeLock(t, path, p, "unknown", true, func(d *lockfile.Document) {
				d.Entry("lock-tools").Set("trust_level", lockfile.Str("curated"))
			}, true)
		}, "seal mismatch"},
		{"entry tampered", func(t *testing.T, path string, p *store.Package) {
			writeLock(t, path, p, "", false, func(d *lockfile.Document) { d.Entry("lock-tools").Set("runtime", lockfile.Str(leakMarker)) }, true)
		}, "1 entry mismatch"},
		{"entry for another version", func(t *testing.T, path string, p *store.Package) {
			writeLock(t, path, p, "", false, func(d *lockfile.Document) { d.Entry("lock-tools").Set("version", lockfile.Str("1.9.0")) }, false)
		}, "another version, artifact_hash or deps_hash"},
		{"corrupt", func(t *testing.T, path string, _ *store.Package) {
			if err := os.WriteFile(path, []byte(`{"lockfile_version":"0.1","packages":{"`+leakMarker), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "cannot be used"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, p, path := lockHome(t, false)
			c.write(t, path, p)
			res, err, reached := runLockStage(t, k, p.ID)
			if !reached {
				t.Fatalf("refused without lockfile.strict: %v", err)
			}
			rec := lastRecord(t, k)
			if c.warn == "" {
				if len(res.Warnings) != 0 || rec.Reason != "stopped after the lockfile stage" {
					t.Fatalf("warnings %q, audit reason %q", res.Warnings, rec.Reason)
				}
				return
			}
			if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], c.warn) {
				t.Fatalf("warnings %q, want one with %q", res.Warnings, c.warn)
			}
			// The refusal of the later stage and the lockfile warning are
			// both in the audit record; the lockfile's content is not.
			if !strings.Contains(rec.Reason, "stopped after the lockfile stage") || !strings.Contains(rec.Reason, c.warn) {
				t.Fatalf("audit reason %q", rec.Reason)
			}
			if strings.Contains(rec.Reason, "SECRET") || strings.Contains(res.Warnings[0], "SECRET") || strings.Contains(rec.Reason, "other-pack") {
				t.Fatalf("lockfile content leaked: %q", rec.Reason)
			}
		})
	}
}

// An allowed decision record carries the warning too (its reason is
// otherwise empty).
func TestLockfileWarningInAllowRecord(t *testing.T) {
	k, p, path := lockHome(t, false)
	writeLock(t, path, p, "", false, func(d *lockfile.Document) { d.Entry("lock-tools").Set("runtime", lockfile.Str("python")) }, true)
	withStages(t,
		stage{name: "config", code: reason.ConfigInvalid, run: stageConfig},
		stage{name: "lockfile", code: reason.LockfileError, run: stageLockfile})
	saved := executeStage
	executeStage = stage{name: "execute", code: reason.PluginUnavailable, run: func(context.Context, *state) error { return nil },
		timeout: saved.timeout}
	t.Cleanup(func() { executeStage = saved })
	k.StageTimeout = 0
	res, err := k.Run(context.Background(), &Request{Package: p.ID, Tool: "echo"})
	if err != nil || res.Decision != "allow" {
		t.Fatalf("%+v %v", res, err)
	}
	recs := tailRecords(t, k, 2)
	if recs[0].Event != "decision" || recs[0].Decision != "allow" || !strings.Contains(recs[0].Reason, "1 entry mismatch") {
		t.Fatalf("decision record %+v", recs[0])
	}
}

// The lockfile's trust_level lowers the trust plugin's answer, never
// raises it, and only from a verified entry of the installed artifact.
func TestLockfileTrustOnlyLowers(t *testing.T) {
	cases := []struct {
		name           string
		level          string
		mutate         func(d *lockfile.Document)
		late           bool
		plugin, wanted string
	}{
		{"lowers curated to verified", "verified", nil, false, "curated", "verified"},
		{"lowers to unknown", "unknown", nil, false, "trusted", "unknown"},
		{"never raises", "curated", nil, false, "unknown", "unknown"},
		{"equal", "trusted", nil, false, "trusted", "trusted"},
		{"not a tier counts as unknown", "gold", nil, false, "curated", "unknown"},
		{"absent: no effect", "", nil, false, "curated", "curated"},
		{"entry of another version: ignored", "unverified", func(d *lockfile.Document) {
			d.Entry("lock-tools").Set("version", lockfile.Str("1.0.0"))
		}, false, "curated", "curated"},
		{"entry mismatching its _integrity: ignored", "unverified", func(d *lockfile.Document) {
			d.Entry("lock-tools").Set("runtime", lockfile.Str("python"))
		}, true, "curated", "curated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, p, path := lockHome(t, false)
			writeLock(t, path, p, c.level, false, c.mutate, c.late)
			st := &state{k: k, req: &Request{Package: p.ID}, res: &Result{}, set: &settings{}}
			if err := stageLockfile(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			st.res.Trust = c.plugin // what the trust plugin answered
			st.lowerTrustToLockfile()
			if st.res.Trust != c.wanted {
				t.Fatalf("trust %s, want %s", st.res.Trust, c.wanted)
			}
			lowered := c.wanted != c.plugin
			if lowered != strings.Contains(st.lockNote, "trust lowered") {
				t.Fatalf("audit note %q", st.lockNote)
			}
		})
	}
}

func tailRecords(t *testing.T, k *Kernel, n int) []audit.Record {
	t.Helper()
	recs, err := auditverify.Tail(home.AuditDir(k.HomeDir), n)
	if err != nil || len(recs) != n {
		t.Fatalf("tail: %v (%d records)", err, len(recs))
	}
	return recs
}
