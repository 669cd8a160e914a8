// Package home knows where agentnode keeps its files: AGENTNODE_HOME
// (default ~/.agentnode) and the fixed layout below it (specs/cli.md, Files), plus the
// AGENTNODE_CONFIG and AGENTNODE_LOCKFILE overrides.
//
// It is in the trusted core because every decision reads its files from these
// paths.
package home

import (
	"fmt"
	"os"
	"path/filepath"
)

// Dir returns AGENTNODE_HOME, or ~/.agentnode. The result is absolute.
func Dir() (string, error) {
	if d := os.Getenv("AGENTNODE_HOME"); d != "" {
		return filepath.Abs(d)
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("locate home directory (set AGENTNODE_HOME): %w", err)
	}
	return filepath.Join(h, ".agentnode"), nil
}

// ConfigPath returns AGENTNODE_CONFIG, or config.json in dir.
func ConfigPath(dir string) string {
	if p := os.Getenv("AGENTNODE_CONFIG"); p != "" {
		return p
	}
	return filepath.Join(dir, "config.json")
}

// LockfilePath returns AGENTNODE_LOCKFILE, or agentnode.lock in the working
// directory.
func LockfilePath() string {
	if p := os.Getenv("AGENTNODE_LOCKFILE"); p != "" {
		return p
	}
	return "agentnode.lock"
}

// AuditDir is where the audit log lives.
func AuditDir(dir string) string { return filepath.Join(dir, "audit") }

// PackagesDir is the installed package store.
func PackagesDir(dir string) string { return filepath.Join(dir, "packages") }

// ImagesDir holds OCI image layouts.
func ImagesDir(dir string) string { return filepath.Join(dir, "images") }

// PluginsDir holds third-party plugin binaries and the pin file.
func PluginsDir(dir string) string { return filepath.Join(dir, "plugins") }

// StateDir holds persistent kernel state such as rate-limit windows.
func StateDir(dir string) string { return filepath.Join(dir, "state") }

// VerdictsDir holds the validation verdicts of kernel/validcache.
func VerdictsDir(dir string) string { return filepath.Join(StateDir(dir), "valid") }

// AuditAnchorPath is the sealed head of the audit chain (kernel/audit,
// specs/audit.md): outside the audit directory, so removing that directory
// does not remove the evidence that it held records.
func AuditAnchorPath(dir string) string { return filepath.Join(StateDir(dir), "audit.anchor") }

// RateLimitPath is the rate-limit state file (kernel/ratelimit).
func RateLimitPath(dir string) string { return filepath.Join(StateDir(dir), "ratelimit.db") }
