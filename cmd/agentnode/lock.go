package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentnode/agentnode/cmd/agentnode/lockedit"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/lockfile"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/store"
)

func init() { register(newLockCmd) }

func newLockCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Verify and seal the lockfile (agentnode.lock)",
		Long: "The lockfile is agentnode.lock in the working directory (AGENTNODE_LOCKFILE overrides). install and\n" +
			"remove keep its entries up to date; `lock seal` adds a keyed seal (key in the OS keychain) that\n" +
			"covers every field, trust_level included. The format is specs/lockfile.md.",
	}
	cmd.AddCommand(newLockVerifyCmd(), newLockSealCmd())
	return cmd
}

// verifyOutput is what lock verify prints with --json.
type verifyOutput struct {
	Path     string   `json:"path"`
	Exists   bool     `json:"exists"`
	Strict   bool     `json:"strict"`
	OK       bool     `json:"ok"`
	Error    string   `json:"error,omitempty"`
	Problems []string `json:"problems"`
	Warnings []string `json:"warnings"`
	*lockfile.Report
}

func newLockVerifyCmd() *cobra.Command {
	var strict, jsonOut bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the lockfile's integrity, structure digest and seal (read-only)",
		Long: "verify never writes and never audits. Exit 1 when any entry, the structure_digest or the seal\n" +
			"mismatches, is invalid or unsupported, or the file is not a valid lockfile; missing parts (and a\n" +
			"seal that cannot be checked here) are warnings with exit 0. --strict: anything not verified is a\n" +
			"problem, including no lockfile at all and a missing seal.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := verifyOutput{Path: home.LockfilePath(), Strict: strict, Problems: []string{}, Warnings: []string{}}
			d, err := lockfile.Load(out.Path)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				msg := "no lockfile at " + out.Path
				if strict {
					out.Problems = append(out.Problems, msg)
				} else {
					out.Warnings = append(out.Warnings, msg)
				}
			case err != nil:
				out.Exists = true
				out.Error = err.Error()
				out.Problems = append(out.Problems, err.Error())
			default:
				out.Exists = true
				out.Report = d.Verify(lockfile.LoadKey)
				out.Problems, out.Warnings = lockedit.Problems(out.Report, strict)
				out.Problems = nonNil(out.Problems)
				out.Warnings = nonNil(out.Warnings)
			}
			out.OK = len(out.Problems) == 0
			if jsonOut {
				if err := writeJSON(cmd.OutOrStdout(), out); err != nil {
					return err
				}
			} else {
				printVerify(cmd, &out)
			}
			if !out.OK {
				return exitWith(reason.ExitFailed)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&strict, "strict", false, "fail on anything not verified, a missing lockfile or seal included")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func printVerify(cmd *cobra.Command, out *verifyOutput) {
	w := cmd.OutOrStdout()
	if r := out.Report; r != nil {
		noun := "packages"
		if len(r.Entries) == 1 {
			noun = "package"
		}
		fmt.Fprintf(w, "lockfile %s (lockfile_version %q, %d %s)\n", out.Path, r.LockfileVersion, len(r.Entries), noun)
		for _, e := range r.Entries {
			v := ""
			if e.CanonicalVersion > 0 {
				v = fmt.Sprintf(" (canonical_version %d)", e.CanonicalVersion)
			}
			fmt.Fprintf(w, "  package %-30s %s%s\n", e.Slug, e.Status, v)
		}
		fmt.Fprintf(w, "  structure_digest %22s %s\n", "", r.Structure.Status)
		fmt.Fprintf(w, "  seal %34s %s\n", "", r.Seal.Status)
	}
	for _, m := range out.Warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "agentnode: warning: %s\n", m)
	}
	for _, m := range out.Problems {
		fmt.Fprintf(cmd.ErrOrStderr(), "agentnode: problem: %s\n", m)
	}
	if out.OK {
		fmt.Fprintln(w, "OK")
	} else {
		fmt.Fprintf(w, "FAILED: %d problem(s)\n", len(out.Problems))
	}
}

// sealOutput is what lock seal prints with --json.
type sealOutput struct {
	Path     string `json:"path"`
	Packages int    `json:"packages"`
	KeyID    string `json:"key_id"`
	Forced   bool   `json:"forced"`
}

func newLockSealCmd() *cobra.Command {
	var force, jsonOut bool
	cmd := &cobra.Command{
		Use:   "seal",
		Short: "Add or renew the lockfile's keyed seal (key in the OS keychain)",
		Long: "seal computes an HMAC-SHA256 over the whole lockfile (trust_level and every other field included)\n" +
			"with a 32-byte key kept in the OS keychain (service " + lockfile.KeychainService + ", created on first use)\n" +
			"and stores it as _agentnode_seal. Without --force it refuses unless every entry's _integrity and the\n" +
			"structure_digest verify (a missing structure_digest is computed) and an existing seal verifies.\n" +
			"--force accepts the file as it is: it recomputes every _integrity and the structure_digest, then seals.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := home.LockfilePath()
			d, err := lockfile.Load(path)
			if errors.Is(err, fs.ErrNotExist) {
				return fail(cmd, jsonOut, reason.New(reason.LockfileError, "no lockfile at %s: install a package first", path))
			}
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			if err := prepareSeal(d, path, force); err != nil {
				return fail(cmd, jsonOut, err)
			}
			key, err := lockfile.LoadOrCreateKey()
			if err != nil {
				return fail(cmd, jsonOut, keychainFailure(err))
			}
			d.Root.Delete(lockfile.FieldSeal)
			lockedit.Seal(d, key)
			if err := lockedit.WriteFile(path, d); err != nil {
				return fail(cmd, jsonOut, reason.New(reason.LockfileError, "%w", err))
			}
			res := sealOutput{Path: path, Packages: len(d.Packages().Obj), KeyID: lockfile.KeyID(key), Forced: force}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sealed %s: %d packages, key_id %s\n", res.Path, res.Packages, res.KeyID)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "recompute every _integrity and the structure_digest, accepting the current content")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

// prepareSeal checks d can be sealed and brings its digests up to date:
// with force every _integrity and the structure_digest are recomputed;
// without, everything must verify (a missing structure_digest is computed).
func prepareSeal(d *lockfile.Document, path string, force bool) error {
	if v := d.Root.Get(lockfile.FieldLockfileVersion).Str; v != lockfile.Version {
		return reason.New(reason.LockfileError, "lockfile %s: lockfile_version is not %q: agentnode cannot seal it", path, lockfile.Version)
	}
	if force {
		for _, m := range d.Packages().Obj {
			m.Value.Delete(lockfile.FieldIntegrity)
			m.Value.Set(lockfile.FieldIntegrity, lockedit.Integrity(m.Value))
		}
		d.Root.Set(lockfile.FieldUpdatedAt, lockfile.Str(time.Now().UTC().Format(time.RFC3339)))
		d.Root.Set(lockfile.FieldStructureDigest, lockedit.StructureDigest(d))
		return nil
	}
	r := d.Verify(lockfile.LoadKey)
	var problems []string
	for _, e := range r.Entries {
		if e.Status != lockfile.Verified {
			problems = append(problems, fmt.Sprintf("package %s: %s (%s)", e.Slug, e.Status, e.Detail))
		}
	}
	if s := r.Structure.Status; s != lockfile.Verified && s != lockfile.Missing {
		problems = append(problems, fmt.Sprintf("structure_digest: %s (%s)", s, r.Structure.Detail))
	}
	if s := r.Seal.Status; s != lockfile.Verified && s != lockfile.Missing {
		problems = append(problems, fmt.Sprintf("seal: %s (%s)", s, r.Seal.Detail))
	}
	if len(problems) > 0 {
		return &failure{exit: reason.ExitFailed, err: reason.New(reason.LockfileError,
			"lockfile %s was not sealed: %s; review it, then `agentnode lock seal --force` accepts it as it is",
			path, strings.Join(problems, "; "))}
	}
	if r.Structure.Status == lockfile.Missing {
		d.Root.Set(lockfile.FieldStructureDigest, lockedit.StructureDigest(d))
	}
	return nil
}

// lockfileUpdater returns the Updater install and remove use for the
// lockfile, after checking — before anything changes — that it can be
// updated: it parses, verifies, and if sealed its seal key can be read.
func lockfileUpdater() (*lockedit.Updater, error) {
	dir, err := home.Dir()
	if err != nil {
		return nil, err
	}
	u := &lockedit.Updater{
		Path:     home.LockfilePath(),
		LockPath: filepath.Join(home.StateDir(dir), "lockfile.lock"),
		Key:      lockfile.LoadKey,
	}
	if err := u.Check(""); err != nil {
		return nil, err
	}
	return u, nil
}

// lockfileInstall adds or replaces p's entry; install calls it before it
// keeps the package (pkginstall.InstallOptions.Commit), so a failure leaves
// nothing installed. Install claims nothing about trust: trust_level is
// left out (trust is decided at run time by the trust plugin; a
// trust_level in the lockfile can only lower it).
func lockfileInstall(u *lockedit.Updater, p *store.Package) error {
	e, err := lockedit.EntryFor(p, lockedit.EntryInfo{Source: lockedit.SourceLocal})
	if err != nil {
		return reason.New(reason.LockfileError, "%s not installed: its lockfile entry could not be built: %w", p.ID, err)
	}
	if err := u.Put(p.ID, e); err != nil {
		return reason.New(reason.LockfileError, "%s not installed: the lockfile was not updated: %w", p.ID, err)
	}
	return nil
}

// lockfileRemove drops the entry of id.
func lockfileRemove(u *lockedit.Updater, id string) error {
	if err := u.Remove(id); err != nil {
		return reason.New(reason.LockfileError, "removed %s, but the lockfile was not updated: %w", id, err)
	}
	return nil
}
