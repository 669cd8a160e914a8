package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentnode/agentnode/kernel/audit"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/kernel/termsafe"
)

func init() { register(newAuditCmd) }

func auditDir() (string, error) {
	dir, err := home.Dir()
	if err != nil {
		return "", reason.New(reason.AuditUnavailable, "locate the audit log: %w", err)
	}
	return home.AuditDir(dir), nil
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
			recs, err := audit.Tail(dir, n)
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
	cmd.AddCommand(newAuditVerifyCmd())
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
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the audit log's hash chain",
		Long: `Check every record of the audit log, oldest rotated file first: valid against
specs/schema/audit-record.schema.json, its hash matching its bytes, seq increasing by one and prev
equal to the previous record's hash, across rotated files. Reports the first broken seq and the
problem (torn_line, parse_error, schema_violation, hash_mismatch, prev_mismatch, seq_gap, seq_order,
head_missing). Exit 0 when the log is intact (a missing log is intact, with 0 records), 1 when it
is not. When old files were rotated away, the oldest remaining record's prev cannot be checked and
is reported as the anchor. The last hash printed is the head of the chain: keep it elsewhere to
detect later removal of the newest records, which a hash chain alone cannot.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := auditDir()
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			rep, err := audit.Verify(dir)
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
			if !rep.OK {
				return exitWith(reason.ExitFailed)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the report as JSON")
	return cmd
}

func printVerifyReport(w io.Writer, rep *audit.Report) {
	if !rep.OK {
		fmt.Fprintf(w, "audit log BROKEN at seq %d: %s: %s\n", rep.FirstBadSeq, rep.Problem, termsafe.Line(rep.Detail))
		fmt.Fprintf(w, "  in %s line %d; %d records before it verified\n", termsafe.Line(rep.File), rep.Line, rep.Records)
		return
	}
	if rep.Records == 0 {
		fmt.Fprintf(w, "audit log OK: no records\n")
		return
	}
	fmt.Fprintf(w, "audit log OK: %d records (seq %d..%d) in %d files\n", rep.Records, rep.FirstSeq, rep.LastSeq, rep.Files)
	if rep.Anchor != "" {
		fmt.Fprintf(w, "  records before seq %d were rotated away; the chain is anchored at prev %s\n", rep.FirstSeq, rep.Anchor)
	}
	fmt.Fprintf(w, "  head: seq %d hash %s\n", rep.LastSeq, rep.LastHash)
}
