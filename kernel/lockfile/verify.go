package lockfile

import "fmt"

// Status is the outcome of checking one part of a lockfile.
type Status string

// Statuses. Entries are verified, missing (no _integrity), mismatch or
// unsupported (an algorithm or canonical_version agentnode does not know);
// the structure also invalid (a malformed structure_digest); the seal also
// unverifiable (no key to check it with).
const (
	Verified     Status = "verified"
	Missing      Status = "missing"
	Mismatch     Status = "mismatch"
	Unsupported  Status = "unsupported"
	Invalid      Status = "invalid"
	Unverifiable Status = "unverifiable"
)

// EntryReport is the status of one entry.
type EntryReport struct {
	Slug             string `json:"slug"`
	Status           Status `json:"status"`
	CanonicalVersion int    `json:"canonical_version,omitempty"`
	Detail           string `json:"detail,omitempty"`
}

// PartReport is the status of the structure digest or the seal.
type PartReport struct {
	Status Status `json:"status"`
	KeyID  string `json:"key_id,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Report is what Verify found. Entries are in file order.
type Report struct {
	LockfileVersion string        `json:"lockfile_version"`
	Structure       PartReport    `json:"structure"`
	Seal            PartReport    `json:"seal"`
	Entries         []EntryReport `json:"packages"`
}

// KeyFunc supplies the seal key. Verify calls it only when the lockfile
// carries a seal.
type KeyFunc func() ([]byte, error)

// Verify checks every entry's _integrity, the structure_digest and, with a
// non-nil key, the keyed seal. It changes nothing.
func (d *Document) Verify(key KeyFunc) *Report {
	r := &Report{LockfileVersion: stringField(d.Root, FieldLockfileVersion)}
	for _, m := range d.Packages().Obj {
		er := verifyEntry(m.Value)
		er.Slug = m.Key
		r.Entries = append(r.Entries, er)
	}
	r.Structure = d.verifyStructure()
	r.Seal = d.verifySeal(key)
	return r
}

// versionOf reads a canonical_version or canonicalization_version literal:
// only the integers 1, 2 and 3 written plainly are known.
func versionOf(v *Value) int {
	if v == nil || v.Kind != Number {
		return 0
	}
	switch v.Str {
	case "1":
		return 1
	case "2":
		return 2
	case "3":
		return 3
	}
	return 0
}

func verifyEntry(e *Value) EntryReport {
	ig := e.Get(FieldIntegrity)
	if ig == nil || ig.Kind == Null {
		return EntryReport{Status: Missing, Detail: "no _integrity"}
	}
	alg, cv, hash := ig.Get("algorithm"), ig.Get("canonical_version"), ig.Get("hash")
	if alg == nil || cv == nil || hash == nil {
		return EntryReport{Status: Mismatch, Detail: "_integrity lacks algorithm, canonical_version or hash"}
	}
	if alg.Str != AlgorithmSHA256 {
		return EntryReport{Status: Unsupported, Detail: "_integrity.algorithm is not sha256"}
	}
	v := versionOf(cv)
	if v == 0 {
		return EntryReport{Status: Unsupported, Detail: "_integrity.canonical_version is not 1, 2 or 3"}
	}
	want, _ := EntryHash(e, v)
	if !validHex(hash.Str) || hash.Str != want {
		return EntryReport{Status: Mismatch, CanonicalVersion: v, Detail: "_integrity.hash does not match the entry's canonical fields"}
	}
	return EntryReport{Status: Verified, CanonicalVersion: v}
}

func (d *Document) verifyStructure() PartReport {
	if lv := stringField(d.Root, FieldLockfileVersion); lv != Version {
		return PartReport{Status: Unsupported, Detail: fmt.Sprintf("lockfile_version is not %q", Version)}
	}
	sd := d.Root.Get(FieldStructureDigest)
	if sd == nil || sd.Kind == Null {
		return PartReport{Status: Missing, Detail: "no structure_digest"}
	}
	alg, cv, hash := sd.Get("algorithm"), sd.Get("canonicalization_version"), sd.Get("hash")
	if alg == nil || cv == nil || hash == nil || !validHex(hash.Str) {
		return PartReport{Status: Invalid, Detail: "structure_digest needs algorithm, canonicalization_version and a 64-digit hex hash"}
	}
	if alg.Str != AlgorithmSHA256 || versionOf(cv) != StructureCanonicalization {
		return PartReport{Status: Unsupported, Detail: "structure_digest is not sha256 with canonicalization_version 1"}
	}
	if hash.Str != StructureHash(d) {
		return PartReport{Status: Mismatch, Detail: "entries were added, removed, renamed or their _integrity changed"}
	}
	return PartReport{Status: Verified}
}

func (d *Document) verifySeal(key KeyFunc) PartReport {
	s := d.Root.Get(FieldSeal)
	if s == nil {
		return PartReport{Status: Missing, Detail: "no keyed seal; `agentnode lock seal` adds one"}
	}
	alg, id, hash := s.Get("algorithm"), s.Get("key_id"), s.Get("hash")
	if alg == nil || id == nil || hash == nil || !validHex(hash.Str) {
		return PartReport{Status: Invalid, Detail: "_agentnode_seal needs algorithm, key_id and a 64-digit hex hash"}
	}
	if alg.Str != AlgorithmSeal {
		return PartReport{Status: Unsupported, Detail: "_agentnode_seal.algorithm is not hmac-sha256"}
	}
	if key == nil {
		return PartReport{Status: Unverifiable, KeyID: id.Str, Detail: "the seal was not checked"}
	}
	k, err := key()
	if err != nil {
		return PartReport{Status: Unverifiable, KeyID: id.Str, Detail: "no seal key: " + err.Error()}
	}
	if mine := KeyID(k); id.Str != mine {
		return PartReport{Status: Mismatch, KeyID: id.Str,
			Detail: fmt.Sprintf("sealed with another key, not this machine's (key_id %s)", mine)}
	}
	if !MACEqual(hash.Str, SealHash(d, k)) {
		return PartReport{Status: Mismatch, KeyID: id.Str, Detail: "the lockfile changed after it was sealed"}
	}
	return PartReport{Status: Verified, KeyID: id.Str}
}

// Counts returns how many entries have each status.
func (r *Report) Counts() map[Status]int {
	c := map[Status]int{}
	for _, e := range r.Entries {
		c[e.Status]++
	}
	return c
}
