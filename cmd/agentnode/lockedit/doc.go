// Package lockedit writes agentnode.lock for the front ends: install and
// remove change one entry at a time (Updater, EntryFor) and `lock seal`
// writes the sealed file (WriteFile) — specs/lockfile.md. New, Integrity,
// StructureDigest, Seal and Marshal build a file's members (write.go);
// Problems sorts what verification found for `lock verify`.
//
// It sits outside the kernel because no run writes the lockfile: a run
// only reads and verifies it (kernel/lockfile). The primitives it writes
// with stay there, one of each, because verification uses them: the strict
// parser, the canonical JSON and the on-disk form, the _integrity and
// structure_digest hashes, the keyed seal's MAC and its key. The permissions forms are here (permissions.go): only install
// writes an entry's permissions, and no run reads them from the lockfile.
package lockedit
