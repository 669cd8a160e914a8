package lockedit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentnode/agentnode/cmd/agentnode/filelock"
	"github.com/agentnode/agentnode/kernel/lockfile"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/atomicfile"
)

// WriteFile writes d to path atomically and durably (sdk/atomicfile: a
// temporary file in the same directory, fsync, rename over path, fsync of
// the directory), so a reader or a crash sees the old content or the new,
// never a mix. An existing file keeps its permission bits; a new one is
// 0644.
func WriteFile(path string, d *lockfile.Document) error {
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := atomicfile.WriteFile(path, Marshal(d), mode); err != nil {
		return fmt.Errorf("write lockfile %s: %w", path, err)
	}
	return nil
}

// Updater changes one entry of a lockfile at a time, the way install and
// remove do. Check refuses, before anything changes, a lockfile that does
// not verify (apart from the entry being changed and anything missing) or
// whose seal cannot be checked; Put and Remove then apply the change under
// an exclusive lock: the entry's _integrity, structure_digest and
// updated_at are recomputed and, if the lockfile was sealed, so is the seal.
type Updater struct {
	// Path is the lockfile.
	Path string
	// LockPath is the flock file that serialises updates ("" for none).
	LockPath string
	// Key supplies the seal key; it is called only for a sealed lockfile.
	Key lockfile.KeyFunc
	// Now is the clock for updated_at (default time.Now).
	Now func() time.Time

	key []byte
}

// Check loads the lockfile (if there is one) and returns an error if it
// could not be updated for slug: it does not parse, its lockfile_version is
// not supported, another entry, the structure or the seal does not verify,
// or it is sealed and the seal key cannot be read. It changes nothing.
func (u *Updater) Check(slug string) error {
	_, err := u.load(slug)
	return err
}

// Put adds or replaces the entry of slug; its _integrity is computed here.
// When entry has no trust_level, the replaced entry's trust_level and
// last_trust_check are kept: a trust cap is never dropped by a re-install.
func (u *Updater) Put(slug string, entry *lockfile.Value) error {
	return u.update(slug, func(d *lockfile.Document) bool {
		e := lockfile.Obj(slices.Clone(entry.Obj)...)
		if old := d.Packages().Get(slug); old != nil && e.Get("trust_level") == nil {
			for _, f := range []string{"trust_level", "last_trust_check"} {
				if v := old.Get(f); v != nil {
					e.Set(f, v)
				}
			}
		}
		e.Delete(lockfile.FieldIntegrity)
		e.Set(lockfile.FieldIntegrity, Integrity(e))
		d.Packages().Set(slug, e)
		return true
	})
}

// Remove drops the entry of slug. A lockfile without it, or no lockfile,
// is left alone.
func (u *Updater) Remove(slug string) error {
	return u.update(slug, func(d *lockfile.Document) bool { return d.Packages().Delete(slug) })
}

func (u *Updater) update(slug string, change func(*lockfile.Document) bool) error {
	if u.LockPath != "" {
		if err := os.MkdirAll(filepath.Dir(u.LockPath), 0o700); err != nil {
			return reason.New(reason.LockfileError, "create the directory of %s: %w", u.LockPath, err)
		}
		release, err := filelock.Lock(u.LockPath)
		if err != nil {
			return reason.New(reason.LockfileError, "lock %s: %w", u.LockPath, err)
		}
		defer release()
	}
	d, err := u.load(slug)
	if err != nil {
		return err
	}
	if d == nil {
		d = New()
	}
	if !change(d) {
		return nil
	}
	now := time.Now
	if u.Now != nil {
		now = u.Now
	}
	d.Root.Set(lockfile.FieldUpdatedAt, lockfile.Str(now().UTC().Format(time.RFC3339)))
	d.Root.Set(lockfile.FieldStructureDigest, StructureDigest(d))
	if d.Sealed() {
		d.Root.Delete(lockfile.FieldSeal) // re-added last, after every other member
		Seal(d, u.key)
	}
	if err := WriteFile(u.Path, d); err != nil {
		return reason.New(reason.LockfileError, "%w", err)
	}
	return nil
}

// load reads the lockfile and checks that it may be updated for slug. A
// missing lockfile is (nil, nil).
func (u *Updater) load(slug string) (*lockfile.Document, error) {
	d, err := lockfile.Load(u.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var key lockfile.KeyFunc
	if d.Sealed() {
		if u.key == nil {
			if u.Key == nil {
				return nil, reason.New(reason.LockfileError, "lockfile %s is sealed and no seal key was given", u.Path)
			}
			k, err := u.Key()
			if err != nil {
				return nil, reason.New(reason.LockfileError, "lockfile %s is sealed but the seal key cannot be read, so it cannot be re-sealed; nothing was changed: %w", u.Path, err)
			}
			u.key = k
		}
		key = func() ([]byte, error) { return u.key, nil }
	}
	r := d.Verify(key)
	// The entry being replaced or removed may be anything.
	kept := r.Entries[:0:0]
	for _, e := range r.Entries {
		if e.Slug != slug {
			kept = append(kept, e)
		}
	}
	r.Entries = kept
	problems, _ := Problems(r, false)
	if len(problems) > 0 {
		return nil, reason.New(reason.LockfileError,
			"lockfile %s does not verify, so it was not changed: %s; check it with `agentnode lock verify`, and accept its current content with `agentnode lock seal --force`",
			u.Path, strings.Join(problems, "; "))
	}
	return d, nil
}
