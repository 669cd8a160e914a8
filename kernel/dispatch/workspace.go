package dispatch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/sandbox"
)

// A workspace is one directory the user names for a run or an MCP session
// (`--workspace DIR`), so that a tool that reads or writes the user's
// files by path can. There is never a default. The decision grants it from
// the manifest's permissions.filesystem.level, already held to the
// ceilings by the policy stage: workspace_read read-only, workspace_write
// and any read-write (still only DIR), none and temp nothing (the run goes
// on without it). The grant is in the result, the audit records and the
// plan; the backends mount it (sandbox) or open it to Landlock (host).

// Workspace access in Result.Workspace.
const (
	WorkspaceReadOnly  = "read-only"
	WorkspaceReadWrite = "read-write"
	WorkspaceNone      = "none"
)

// WorkspaceGrant is what a run was given of the workspace it was asked to
// have (Result.Workspace).
type WorkspaceGrant struct {
	Path   string `json:"path"`
	Access string `json:"access"`           // read-only | read-write | none
	Reason string `json:"reason,omitempty"` // why none
}

// systemTrees are host trees no workspace may be in: the kernel's, and
// /run, where the system's and the engines' sockets live (a socket in a
// workspace is reachable with connect(2), read-only or not).
var systemTrees = []string{"/proc", "/sys", "/dev", "/run"}

// ResolveWorkspace checks a directory named with --workspace and returns
// it absolute and symlink-free. It is refused (workspace_invalid) when it
// does not exist, is not a directory, is "/", is under /proc, /sys, /dev
// or /run, or is inside home (AGENTNODE_HOME: the store, the audit log, the
// keys) or contains it.
func ResolveWorkspace(dir, home string) (string, error) {
	refuse := func(format string, args ...any) error {
		return reason.New(reason.WorkspaceInvalid, "workspace %q: "+format, append([]any{dir}, args...)...)
	}
	if dir == "" {
		return "", refuse("empty path")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", refuse("%w", err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", refuse("%w", err)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return "", refuse("%w", err)
	}
	if !fi.IsDir() {
		return "", refuse("%s is not a directory", resolved)
	}
	if resolved == "/" {
		return "", refuse("the root directory is never a workspace")
	}
	for _, t := range systemTrees {
		if within(resolved, t) {
			return "", refuse("%s is under %s", resolved, t)
		}
	}
	if home != "" {
		h, err := filepath.Abs(home)
		if err == nil {
			// A home that does not exist yet is compared as written.
			if r, rerr := filepath.EvalSymlinks(h); rerr == nil {
				h = r
			} else if !errors.Is(rerr, os.ErrNotExist) {
				err = rerr
			}
		}
		if err != nil {
			return "", refuse("cannot compare with AGENTNODE_HOME %s: %w", home, err)
		}
		switch {
		case within(resolved, h):
			return "", refuse("%s is inside AGENTNODE_HOME %s (the store, the audit log, the keys)", resolved, h)
		case within(h, resolved):
			return "", refuse("%s contains AGENTNODE_HOME %s (the store, the audit log, the keys)", resolved, h)
		}
	}
	return resolved, nil
}

// within reports whether p is dir or below it (both clean and absolute).
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// grantWorkspace decides what the run gets of the requested workspace,
// from the package's declared filesystem level.
func (st *state) grantWorkspace() {
	if st.req.Workspace == "" || st.pkg == nil {
		return
	}
	g := &WorkspaceGrant{Path: st.workspacePath}
	if st.pkg.Manifest.PackageType == manifest.TypeAgent {
		// The agent's own code is never given the directory (its task has
		// no workspace); each tool it calls is granted by its own level.
		g.Access, g.Reason = WorkspaceNone, "an agent: its tool calls are granted by their own filesystem levels"
		st.res.Workspace = g
		return
	}
	switch level := st.pkg.Manifest.Permissions.Filesystem.Level; level {
	case "workspace_read":
		g.Access = WorkspaceReadOnly
	case "workspace_write", "any":
		g.Access = WorkspaceReadWrite
	default:
		g.Access, g.Reason = WorkspaceNone, fmt.Sprintf("filesystem level %s", level)
	}
	st.res.Workspace = g
}

// grantedWorkspacePath is the granted workspace's path for the
// inspectors ("" when none was granted), deciding the grant if it was not
// yet.
func (st *state) grantedWorkspacePath() string {
	if st.res.Workspace == nil {
		st.grantWorkspace()
	}
	if w := st.workspace(); w != nil {
		return w.Path
	}
	return ""
}

// workspace is the plan's workspace: nil unless granted.
func (st *state) workspace() *sandbox.Workspace {
	g := st.res.Workspace
	if g == nil || g.Access == WorkspaceNone {
		return nil
	}
	return &sandbox.Workspace{Path: g.Path, Writable: g.Access == WorkspaceReadWrite}
}

// String is the grant as the audit record's workspace field says it:
// "read-only /path", "read-write /path" or "not granted (filesystem level
// none): /path".
func (g *WorkspaceGrant) String() string {
	if g == nil {
		return ""
	}
	if g.Access == WorkspaceNone {
		return "not granted (" + g.Reason + "): " + g.Path
	}
	return g.Access + " " + g.Path
}
