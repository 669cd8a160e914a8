package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/lockfile"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
	"github.com/agentnode/agentnode/sdk/trust"
)

// loadSealKey reads the lockfile seal key for a seal that names key_id id:
// from the kernel keyring's cache when it holds that key, else from the OS
// keychain (a variable for tests).
var loadSealKey = lockfile.LoadKeyFor

// stageLockfile checks agentnode.lock (specs/lockfile.md, "At run time").
//
// With lockfile.strict the lockfile must exist and parse, every entry's
// _integrity and the structure_digest must verify, the keyed seal must be
// present and verify with this machine's key, and the package must have an
// entry whose version and artifact_hash are the installed package's;
// anything else denies with integrity_denied.
//
// Without strict, no lockfile is fine; a lockfile that does not parse, a
// mismatching, invalid or unsupported entry, structure or seal, or an entry
// for this package that names another version or artifact produces one
// warning, which also goes into the audit record's reason. Missing parts do
// not warn.
//
// Either way, a verified entry for the installed package remembers its
// trust_level, which stageTrust uses to lower (never raise) the trust.
// Messages never quote the lockfile's content.
func stageLockfile(_ context.Context, st *state) error {
	path := home.LockfilePath()
	strict := st.set.lockfileStrict
	d, err := lockfile.Load(path)
	if errors.Is(err, fs.ErrNotExist) {
		if strict {
			return reason.New(reason.IntegrityDenied, "lockfile.strict is on and there is no lockfile at %s", path)
		}
		return nil
	}
	if err != nil {
		if strict {
			return reason.New(reason.IntegrityDenied, "lockfile.strict: %w", err)
		}
		st.lockWarn(fmt.Sprintf("the lockfile cannot be used: %v", err))
		return nil
	}
	var key lockfile.KeyFunc
	if strict || d.Sealed() {
		key = func() ([]byte, error) { return loadSealKey(d.SealKeyID()) }
	}
	r := d.Verify(key)

	// The installed package, to compare with its entry. Not installed: the
	// artifact stage refuses.
	pkg, perr := st.k.store().Get(st.req.Package)
	if perr != nil && !errors.Is(perr, store.ErrNotInstalled) {
		return reason.New(reason.ArtifactMismatch, "%w", perr)
	}
	if pkg != nil {
		st.res.Version = pkg.Version
		st.loaded = pkg // the artifact stage re-hashes its content
	}
	entry := d.Entry(st.req.Package)
	var entryStatus lockfile.Status = lockfile.Missing
	for _, e := range r.Entries {
		if e.Slug == st.req.Package {
			entryStatus = e.Status
		}
	}
	entryMatches := entry != nil && pkg != nil &&
		lockString(entry, "version") == pkg.Version && lockString(entry, "artifact_hash") == pkg.ArtifactHash &&
		lockString(entry, lockfile.FieldDepsHash) == pkg.DepsHash

	if strict {
		var why []string
		if bad := summarize(r, true); bad != "" {
			why = append(why, "it does not verify ("+bad+")")
		}
		switch {
		case entry == nil:
			why = append(why, "it has no entry for this package")
		case pkg != nil && !entryMatches:
			why = append(why, "its entry for this package names another version, artifact_hash or deps_hash than the installed one")
		}
		if len(why) > 0 {
			return reason.New(reason.IntegrityDenied, "lockfile.strict: lockfile %s: %s", path, strings.Join(why, "; "))
		}
	} else {
		var why []string
		if bad := summarize(r, false); bad != "" {
			why = append(why, bad)
		}
		if entry != nil && pkg != nil && !entryMatches {
			why = append(why, "the entry for this package names another version, artifact_hash or deps_hash than the installed one")
		}
		if len(why) > 0 {
			st.lockWarn(fmt.Sprintf("lockfile %s does not verify: %s (see `agentnode lock verify`)", path, strings.Join(why, "; ")))
		}
	}
	if entryStatus == lockfile.Verified && entryMatches {
		st.lockEntry = entry // mcp.go: the sealed MCP launch
		st.lockTrust = lockString(entry, "trust_level")
		if st.lockTrust == "" && entry.Get("trust_level") != nil {
			st.lockTrust = trust.LevelUnknown // present but not a string: the lowest tier
		}
	}
	return nil
}

// summarize describes, without content, what in r is a problem: counts of
// entries by status and the structure and seal statuses. Strict counts
// everything not verified; otherwise only mismatch, invalid and
// unsupported.
func summarize(r *lockfile.Report, strict bool) string {
	bad := func(s lockfile.Status) bool {
		if strict {
			return s != lockfile.Verified
		}
		return s == lockfile.Mismatch || s == lockfile.Invalid || s == lockfile.Unsupported
	}
	var parts []string
	counts := r.Counts()
	for _, s := range []lockfile.Status{lockfile.Mismatch, lockfile.Unsupported, lockfile.Missing} {
		if n := counts[s]; n > 0 && bad(s) {
			parts = append(parts, fmt.Sprintf("%d %s %s", n, plural(n, "entry", "entries"), s))
		}
	}
	if bad(r.Structure.Status) {
		parts = append(parts, "structure_digest "+string(r.Structure.Status))
	}
	if bad(r.Seal.Status) {
		parts = append(parts, "seal "+string(r.Seal.Status))
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func lockString(e *lockfile.Value, field string) string {
	if v := e.Get(field); v != nil && v.Kind == lockfile.String {
		return v.Str
	}
	return ""
}

// lockWarn warns once and keeps the message for the audit record.
func (st *state) lockWarn(msg string) {
	st.lockNote = msg
	st.k.warn(st, msg)
}

// lowerTrustToLockfile applies the lockfile's trust_level after the trust
// plugin answered: it can only lower the tier, never raise it. A
// trust_level that is not a tier counts as unknown, the lowest.
func (st *state) lowerTrustToLockfile() {
	if st.lockTrust == "" {
		return
	}
	level := st.lockTrust
	if trust.Rank(level) < 0 {
		level = trust.LevelUnknown
	}
	if trust.Rank(level) < trust.Rank(st.res.Trust) {
		msg := fmt.Sprintf("trust lowered from %s to %s by the lockfile's trust_level", st.res.Trust, level)
		st.res.Trust = level
		st.k.warn(st, msg)
		st.lockNote = strings.TrimPrefix(st.lockNote+"; "+msg, "; ")
	}
}

// auditReason is the reason text of an audit record: the refusal's reason
// and any lockfile warning.
func (st *state) auditReason() string {
	switch {
	case st.lockNote == "":
		return st.res.Reason
	case st.res.Reason == "":
		return st.lockNote
	}
	return st.res.Reason + " (" + st.lockNote + ")"
}
