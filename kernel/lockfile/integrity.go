package lockfile

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
)

// Digest constants.
const (
	AlgorithmSHA256 = "sha256"
	// StructureCanonicalization is structure_digest's canonicalization_version.
	StructureCanonicalization = 1
	// StructureKind is the "kind" member of the structure digest's input.
	StructureKind = "agentnode.lock.structure"
)

// CanonicalEntry returns the object _integrity hashes for entry in
// canonical_version v: the canonical fields of v that are present and not
// null. It returns nil for an unknown v.
func CanonicalEntry(entry *Value, v int) *Value {
	fields := CanonicalFields(v)
	if fields == nil {
		return nil
	}
	out := Obj()
	for _, m := range entry.Obj {
		if m.Value.Kind != Null && slices.Contains(fields, m.Key) {
			out.Obj = append(out.Obj, m)
		}
	}
	return out
}

// EntryHash is the hex SHA-256 of the canonical JSON of CanonicalEntry.
// ok is false for an unknown v.
func EntryHash(entry *Value, v int) (hash string, ok bool) {
	c := CanonicalEntry(entry, v)
	if c == nil {
		return "", false
	}
	return sha256Hex(Canonical(c)), true
}

// StructureInput is the document structure_digest hashes:
// {"kind", "lockfile_version", "canonicalization_version", "entries"} where
// entries lists [slug, {algorithm, canonical_version, hash}] sorted by slug,
// each _integrity reduced to those three members as stored (an entry
// without _integrity contributes [slug, null]).
func StructureInput(d *Document) *Value {
	pk := d.Packages()
	members := slices.Clone(pk.Obj)
	slices.SortFunc(members, func(x, y Member) int { return strings.Compare(x.Key, y.Key) })
	entries := &Value{Kind: Array, Arr: make([]*Value, 0, len(members))}
	for _, m := range members {
		ig := m.Value.Get(FieldIntegrity)
		red := &Value{Kind: Null}
		if ig != nil && ig.Kind == Object {
			red = Obj()
			for _, f := range []string{"algorithm", "canonical_version", "hash"} {
				if x := ig.Get(f); x != nil {
					red.Obj = append(red.Obj, Member{f, x})
				}
			}
		}
		entries.Arr = append(entries.Arr, &Value{Kind: Array, Arr: []*Value{Str(m.Key), red}})
	}
	return Obj(
		Member{"kind", Str(StructureKind)},
		Member{FieldLockfileVersion, d.Root.Get(FieldLockfileVersion)},
		Member{"canonicalization_version", Int(StructureCanonicalization)},
		Member{"entries", entries},
	)
}

// StructureHash is the hex SHA-256 of the canonical JSON of StructureInput.
func StructureHash(d *Document) string { return sha256Hex(Canonical(StructureInput(d))) }

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// validHex reports whether s is 64 lower-case hex digits.
func validHex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
