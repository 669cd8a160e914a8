// Package lockfile reads and verifies agentnode.lock, the AgentNode-compatible
// lockfile (specs/lockfile.md), and holds the primitives its writers use.
// It is in the trusted core because every run reads the lockfile and
// decides on what it verifies (kernel/dispatch); writing it is a front-end
// task (install, remove, `lock seal`: cmd/agentnode/lockedit).
//
// A lockfile is parsed into an ordered tree of JSON values (Value) that keeps
// every number exactly as written and every object's key order, so entries
// agentnode does not touch are written back unchanged. Parse is strict:
// duplicate keys at any level, invalid UTF-8, lone surrogate escapes, trailing
// data and wrong types of the fields agentnode reads are errors, and no error
// message ever repeats content of the file (only byte offsets, field names
// agentnode defines and the position of an entry).
//
// Integrity follows AgentNode: each entry's _integrity is SHA-256 over the
// canonical JSON (Canonical) of its canonical fields (V1, V2 or V3), and
// structure_digest is SHA-256 over the sorted list of (slug, _integrity).
// Neither is keyed: anyone who edits the file can recompute them. agentnode
// adds a keyed seal, the top-level member _agentnode_seal: HMAC-SHA256 with a
// 32-byte key kept in the OS keychain over the canonical JSON of the whole
// document without the seal, so it also covers trust_level and every other
// mutable field.
//
// Verify reports per-entry, structure and seal statuses; it never writes.
// EntryHash, StructureHash, SealHash (MAC), KeyID, Indented and the seal
// key are what the writers in cmd/agentnode/lockedit compute with (its
// Integrity, StructureDigest and Seal build the members from them): one
// implementation of each, here. The tests in package lockfile_test build
// their lockfiles with those writers.
//
// ParseValue (scan.go) is a hand-written scanner beside the reference it
// replaced, a walk over encoding/json's Decoder.Token
// (decoderParseValue in decoder_test.go). It stays because it is about 6
// times faster: BenchmarkParseValue1000 15-18 ms and 54,000 allocations
// for a 1,000-entry lockfile (1.7 MB), against BenchmarkDecoderParseValue1000
// 101-106 ms and 569,000 allocations (2 cores; every run parses the
// lockfile). FuzzParseValue, in the fuzz loop of test/run.sh, holds it to
// the reference: on any input both accept with equal trees or both refuse.
package lockfile
