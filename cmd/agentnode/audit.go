package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentnode/agentnode/cmd/agentnode/auditverify"
	"github.com/agentnode/agentnode/cmd/agentnode/termsafe"
	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/lockfile"
	"github.com/agentnode/agentnode/kernel/reason"
)

func init() { register(newAuditCmd) }

func auditDir() (string, error) {
	dir, err := home.Dir()
	if err != nil {
		return "", reason.New(reason.AuditUnavailable, "locate the audit log: %w", err)
	}
	return home.AuditDir(dir), nil
}

// auditAnchor is the home's audit anchor, its Key replaced by key unless
// nil (audit.SealKey: the cached key, else the keychain's, created if there
// is none, as reanchor wants).
func auditAnchor(key func(keyID string) ([]byte, error)) (*audit.Anchor, error) {
	dir, err := home.Dir()
	if err != nil {
		return nil, reason.New(reason.AuditUnavailable, "locate the audit anchor: %w", err)
	}
	a := audit.HomeAnchor(home.AuditAnchorPath(dir))
	if key != nil {
		a.Key = key
	}
	return a, nil
}

func newAuditCmd() *cobra.Command {
	var (
		n       int
		jsonOut bool
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the newest audit records",
		Long: `Show the last N records of the audit log ($AGENTNODE_HOME/audit/audit.jsonl and its rotated
files), oldest first: one line per record, or with --json the records as JSON lines. -n 0 shows
every record. A missing log shows nothing. Records are not checked here: use 'agentnode audit verify'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if n < 0 {
				return fail(cmd, jsonOut, usageError("-n must be 0 (every record) or more, not %d", n))
			}
			dir, err := auditDir()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			recs, err := auditverify.Tail(dir, n)
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			w := cmd.OutOrStdout()
			for _, r := range recs {
				if jsonOut {
					if err := writeJSON(w, r); err != nil {
						return err
					}
					continue
				}
				if _, err := io.WriteString(w, formatRecord(r)+"\n"); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().IntVarP(&n, "lines", "n", 20, "how many of the newest records to show (0: all)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the records as JSON lines")
	cmd.AddCommand(newAuditVerifyCmd(), newAuditReanchorCmd())
	return cmd
}

// formatRecord renders a record on one line:
//
//	42 2026-01-02T03:04:05.678Z decision deny acme-tools@1.4.2 rm action=delete trust=verified placement=none code=policy_denied reason="..."
//
// Every field is escaped (termsafe.Line; the reason is quoted): a record
// holds what packages, tools and plugins said, and the log may have been
// edited.
func formatRecord(r audit.Record) string {
	var b strings.Builder
	l := termsafe.Line
	fmt.Fprintf(&b, "%d %s %s %s", r.Seq, r.TS.UTC().Format("2006-01-02T15:04:05.000Z"), l(r.Event), l(r.Decision))
	if r.Package != "" || r.Tool != "" {
		pkg := r.Package
		if r.Version != "" {
			pkg += "@" + r.Version
		}
		fmt.Fprintf(&b, " %s %s", l(pkg), l(r.Tool))
	}
	if r.Action != "" {
		fmt.Fprintf(&b, " action=%s", l(r.Action))
	}
	if r.Trust != "" {
		fmt.Fprintf(&b, " trust=%s", l(r.Trust))
	}
	placement := r.Placement
	if r.Backend != "" {
		placement += "/" + r.Backend
	}
	if r.Runtime != "" {
		placement += "/" + r.Runtime
	}
	fmt.Fprintf(&b, " placement=%s", l(placement))
	if r.Code != "" {
		fmt.Fprintf(&b, " code=%s", l(r.Code))
	}
	if r.ExitCode != nil {
		fmt.Fprintf(&b, " exit=%d", *r.ExitCode)
	}
	if r.DurationMS != nil {
		fmt.Fprintf(&b, " duration=%dms", *r.DurationMS)
	}
	if r.Reason != "" {
		fmt.Fprintf(&b, " reason=%q", r.Reason)
	}
	return b.String()
}

func newAuditVerifyCmd() *cobra.Command {
	var jsonOut, strict bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the audit log's hash chain and its sealed anchor",
		Long: `Check every record of the audit log, oldest rotated file first: valid against
specs/schema/audit-record.schema.json, its hash matching its bytes, seq increasing by one and prev
equal to the previous record's hash, across rotated files (torn_line, parse_error, schema_violation,
hash_mismatch, prev_mismatch, seq_gap, seq_order, head_missing). Then check that the log ends where
its anchor ($AGENTNODE_HOME/state/audit.anchor, sealed with the lockfile seal key in the OS keychain)
says (anchor_mismatch: records cut off, rewritten with recomputed hashes, appended outside agentnode,
or the log emptied or deleted; anchor_invalid; anchor_unsealed; anchor_missing), and that it still
holds the head its witness in the OS keychain remembers (rollback). A verify that passes with a
checked seal moves the witness on to the log's head. Exit 0 when intact, 1 when not. Warnings (an
unsealed anchor, a seal that could not be checked, a log not anchored yet, an allowed run with no
outcome record) fail only with --strict.
See specs/audit.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := auditDir()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			// The keychain itself, not the kernel keyring's cache: verify
			// says what the keychain's key makes of the anchor (and
			// refreshes the cache).
			a, err := auditAnchor(func(string) ([]byte, error) { return lockfile.LoadKey() })
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			rep, err := auditverify.VerifyAnchored(dir, a)
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			w := cmd.OutOrStdout()
			if jsonOut {
				if err := writeJSON(w, rep); err != nil {
					return err
				}
			} else {
				printVerifyReport(w, rep)
			}
			if !rep.OK || strict && len(rep.Warnings) > 0 {
				return exitWith(reason.ExitFailed)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&strict, "strict", false, "fail on warnings too (an unsealed or unchecked anchor, a run without an outcome record)")
	return cmd
}

func newAuditReanchorCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "reanchor",
		Short: "Accept the audit log as it is: seal its head as the anchor",
		Long: `Check the audit log's own chain and, if it is intact, seal its head as the anchor
($AGENTNODE_HOME/state/audit.anchor) and set its witness in the OS keychain (creating the seal key
if there is none). For after moving AGENTNODE_HOME, after starting over (the audit directory moved
aside as evidence), or to accept a log after investigating what 'agentnode audit verify' reported.
Without an OS keychain the anchor is written unsealed; a sealed anchor is never replaced by an
unsealed one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := auditDir()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			a, err := auditAnchor(nil)
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			rep, err := auditverify.Reanchor(dir, a)
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), rep.Seal)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "audit log anchored at seq %d hash %s (%s", rep.Seal.HeadSeq, rep.Seal.HeadHash, rep.Seal.Status)
			if rep.Seal.KeyID != "" {
				fmt.Fprintf(cmd.OutOrStdout(), ", key_id %s", rep.Seal.KeyID)
			}
			fmt.Fprintln(cmd.OutOrStdout(), ")")
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the new anchor as JSON")
	return cmd
}

func printVerifyReport(w io.Writer, rep *auditverify.Report) {
	defer func() {
		for _, warn := range rep.Warnings {
			fmt.Fprintf(w, "  warning: %s\n", termsafe.Line(warn))
		}
	}()
	if !rep.OK {
		fmt.Fprintf(w, "audit log BROKEN at seq %d: %s: %s\n", rep.FirstBadSeq, rep.Problem, termsafe.Line(rep.Detail))
		if rep.File != "" {
			fmt.Fprintf(w, "  in %s line %d; %d records before it verified\n", termsafe.Line(rep.File), rep.Line, rep.Records)
		} else {
			fmt.Fprintf(w, "  the chain itself verified: %d records\n", rep.Records)
		}
		return
	}
	if rep.Records == 0 {
		fmt.Fprintf(w, "audit log OK: no records\n")
	} else {
		fmt.Fprintf(w, "audit log OK: %d records (seq %d..%d) in %d files\n", rep.Records, rep.FirstSeq, rep.LastSeq, rep.Files)
		if rep.Anchor != "" {
			fmt.Fprintf(w, "  records before seq %d were rotated away; the chain is anchored at prev %s\n", rep.FirstSeq, rep.Anchor)
		}
		fmt.Fprintf(w, "  head: seq %d hash %s\n", rep.LastSeq, rep.LastHash)
	}
	if s := rep.Seal; s != nil {
		fmt.Fprintf(w, "  anchor: %s", s.Status)
		if s.KeyID != "" {
			fmt.Fprintf(w, " (key_id %s)", s.KeyID)
		}
		if s.Pending {
			fmt.Fprintf(w, "; the last record was being written when an append stopped, and is the one it had sealed as pending")
		}
		if s.Torn {
			fmt.Fprintf(w, "; one of its two slots is torn (a crash while writing it), the other one held")
		}
		fmt.Fprintf(w, "; witness: %s\n", s.Witness)
	}
}
