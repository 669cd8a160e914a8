package lockedit

import (
	"fmt"
	"strings"

	"github.com/agentnode/agentnode/kernel/lockfile"
)

// New returns an empty lockfile: lockfile_version, no packages.
func New() *lockfile.Document {
	return &lockfile.Document{Root: lockfile.Obj(
		lockfile.Member{Key: lockfile.FieldLockfileVersion, Value: lockfile.Str(lockfile.Version)},
		lockfile.Member{Key: lockfile.FieldPackages, Value: lockfile.Obj()},
	)}
}

// Marshal returns the lockfile's on-disk form (lockfile.Indented).
func Marshal(d *lockfile.Document) []byte { return lockfile.Indented(d.Root) }

// SelectCanonicalVersion is the canonical_version AgentNode seals an entry
// with: 3 if publisher_slug is a non-blank string, else 2 if _signatures is
// a non-empty object, else 1.
func SelectCanonicalVersion(entry *lockfile.Value) int {
	if p := entry.Get("publisher_slug"); p != nil && p.Kind == lockfile.String && strings.TrimSpace(p.Str) != "" {
		return 3
	}
	if s := entry.Get("_signatures"); s != nil && s.Kind == lockfile.Object && len(s.Obj) > 0 {
		return 2
	}
	return 1
}

// Integrity computes a fresh _integrity for entry with the canonical
// version SelectCanonicalVersion picks (lockfile.EntryHash).
func Integrity(entry *lockfile.Value) *lockfile.Value {
	v := SelectCanonicalVersion(entry)
	h, _ := lockfile.EntryHash(entry, v)
	return lockfile.Obj(
		lockfile.Member{Key: "algorithm", Value: lockfile.Str(lockfile.AlgorithmSHA256)},
		lockfile.Member{Key: "canonical_version", Value: lockfile.Int(v)},
		lockfile.Member{Key: "hash", Value: lockfile.Str(h)},
	)
}

// StructureDigest computes a fresh structure_digest
// (lockfile.StructureHash).
func StructureDigest(d *lockfile.Document) *lockfile.Value {
	return lockfile.Obj(
		lockfile.Member{Key: "algorithm", Value: lockfile.Str(lockfile.AlgorithmSHA256)},
		lockfile.Member{Key: "canonicalization_version", Value: lockfile.Int(lockfile.StructureCanonicalization)},
		lockfile.Member{Key: "hash", Value: lockfile.Str(lockfile.StructureHash(d))},
	)
}

// Seal sets d's _agentnode_seal for key (replacing one that is there):
// lockfile.SealHash, the MAC verification checks. Call it after the last
// change to d.
func Seal(d *lockfile.Document, key []byte) {
	d.Root.Set(lockfile.FieldSeal, lockfile.Obj(
		lockfile.Member{Key: "algorithm", Value: lockfile.Str(lockfile.AlgorithmSeal)},
		lockfile.Member{Key: "key_id", Value: lockfile.Str(lockfile.KeyID(key))},
		lockfile.Member{Key: "hash", Value: lockfile.Str(lockfile.SealHash(d, key))},
	))
}

// Problems sorts a verification report's findings into problems (verify
// exits 1) and warnings. Normal mode: mismatch, invalid and unsupported
// are problems; missing and unverifiable are warnings. Strict mode:
// anything not verified is a problem, including a missing seal.
func Problems(r *lockfile.Report, strict bool) (problems, warnings []string) {
	add := func(st lockfile.Status, what, detail string) {
		if st == lockfile.Verified {
			return
		}
		msg := fmt.Sprintf("%s: %s (%s)", what, st, detail)
		if strict || (st != lockfile.Missing && st != lockfile.Unverifiable) {
			problems = append(problems, msg)
		} else {
			warnings = append(warnings, msg)
		}
	}
	for _, e := range r.Entries {
		add(e.Status, "package "+e.Slug, e.Detail)
	}
	add(r.Structure.Status, "structure_digest", r.Structure.Detail)
	add(r.Seal.Status, "seal", r.Seal.Detail)
	return problems, warnings
}
