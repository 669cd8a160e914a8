package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/agentnode/agentnode/cmd/agentnode/configedit"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/reason"
	"github.com/agentnode/agentnode/sdk/sandbox/subid"
)

func init() { register(newSetupCmd) }

// setupHooks run, in order, after `agentnode setup` has created the home
// layout and written the config. Other command files append to it from their
// init functions (plugin pinning registers here). A hook's error fails setup
// with that error's exit code; hooks must be idempotent, since setup is run
// again on an existing home.
var setupHooks []func(cmd *cobra.Command, homeDir string) error

// setupResult is what setup prints with --json.
type setupResult struct {
	Home          string   `json:"home"`
	Config        string   `json:"config"`
	CreatedDirs   []string `json:"created_dirs"`
	OpenDirs      []string `json:"readable_by_others"`
	ConfigCreated bool     `json:"config_created"`
	AddedKeys     []string `json:"added_keys"`
	// SubIDs is agentnode's reservation of subordinate ids in /etc/subuid
	// and /etc/subgid ("START-END"), which the libcontainer backend maps
	// each sandbox's user namespace into; "" when setup could not make it
	// (SubIDsNote says why).
	SubIDs      string `json:"subordinate_ids"`
	SubIDsAdded bool   `json:"subordinate_ids_added"`
	SubIDsNote  string `json:"subordinate_ids_note,omitempty"`
}

func newSetupCmd() *cobra.Command {
	var jsonOut, nonInteractive bool
	var delegate string
	cmd := &cobra.Command{
		Use:   "setup",
		Short: "Create AGENTNODE_HOME and a config with secure defaults (never changes existing values)",
		Long: `Create AGENTNODE_HOME (default ~/.agentnode, mode 0700) with audit/, packages/,
images/, plugins/ and state/, and write config.json (0600) with secure defaults.

On an existing home, setup creates what is missing and adds config keys the
file lacks, with their defaults. It never chmods an existing directory: one
that group or others can write is refused, one they can read is reported. It never changes a value already in the config, and refuses
an invalid config (fix it, or move it away and run setup again).

Setup asks no questions; --non-interactive is accepted for scripts.

--delegate USER (root only, cgroup v1) does only this, once per user: under
each cgroup controller the sandbox limits need (cpu, memory, pids, freezer)
it creates /agentnode-users/UID and gives it to USER, so that the
libcontainer backend, run by USER without root, can place each sandbox in a
cgroup of its own and enforce its limits. Without it a normal user's
sandboxed runs are refused. It touches no home and no config. On cgroup v2
systemd delegates instead (run agentnode in a user service or in
systemd-run --user --scope -p Delegate=yes).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = nonInteractive // setup never prompts
			if delegate != "" {
				res, err := runDelegate(delegate)
				if err != nil {
					return fail(cmd, jsonOut, err)
				}
				if jsonOut {
					return writeJSON(cmd.OutOrStdout(), res)
				}
				for _, d := range res.Dirs {
					fmt.Fprintf(cmd.OutOrStdout(), "delegated %s to %s (uid %d)\n", d, res.User, res.UID)
				}
				if res.Note != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "note      %s\n", res.Note)
				}
				return nil
			}
			res, err := runSetup(cmd)
			if err != nil {
				return fail(cmd, jsonOut, err)
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			printSetup(cmd, res)
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	cmd.Flags().StringVar(&delegate, "delegate", "", "as root: delegate a cgroup subtree to USER (name or uid) so that its sandboxes get their limits, and do nothing else")
	cmd.Flags().BoolVar(&nonInteractive, "non-interactive", false, "never prompt (setup does not prompt; accepted for scripts)")
	return cmd
}

func runSetup(cmd *cobra.Command) (*setupResult, error) {
	dir, err := home.Dir()
	if err != nil {
		return nil, reason.Wrap(reason.NotSetUp, err, "")
	}
	res := &setupResult{Home: dir, Config: home.ConfigPath(dir), CreatedDirs: []string{}, OpenDirs: []string{}, AddedKeys: []string{}}
	dirs := []string{dir, home.AuditDir(dir), home.PackagesDir(dir), home.ImagesDir(dir), home.PluginsDir(dir), home.StateDir(dir)}
	for _, d := range dirs {
		created, open, err := ensurePrivateDir(d)
		if err != nil {
			return nil, err
		}
		if created {
			res.CreatedDirs = append(res.CreatedDirs, d)
		}
		if open {
			res.OpenDirs = append(res.OpenDirs, d)
		}
	}
	created, added, err := configedit.Setup(res.Config)
	if err != nil {
		return nil, err
	}
	res.ConfigCreated = created
	res.AddedKeys = append(res.AddedKeys, added...)
	res.SubIDs, res.SubIDsAdded, res.SubIDsNote = reserveSubIDs()
	for _, hook := range setupHooks {
		if err := hook(cmd, dir); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// reserveSubIDs makes agentnode's reservation of subordinate ids
// (sdk/sandbox/subid), which the libcontainer backend needs: every sandbox
// runs in a user namespace mapped into it. It needs root (as the backend
// does); without it, or should the files refuse it, setup still succeeds
// and says why (the backend then reports itself unavailable).
func reserveSubIDs() (rng string, added bool, note string) {
	if runtime.GOOS != "linux" {
		return "", false, "no subordinate ids on " + runtime.GOOS + " (the libcontainer backend is Linux only)"
	}
	if uid := os.Geteuid(); uid != 0 {
		return "", false, rootlessNote(uid)
	}
	r, added, err := subid.Reserve(subid.Files{})
	if err != nil {
		return "", false, fmt.Sprintf("no subordinate ids reserved (the libcontainer backend needs them): %v", err)
	}
	return r.String(), added, ""
}

// ensurePrivateDir creates d with mode 0700. An existing directory is never
// chmodded (AGENTNODE_HOME may point anywhere): one that group or others can
// write is refused, one they can only read is reported as open.
func ensurePrivateDir(d string) (created, open bool, err error) {
	fi, err := os.Stat(d)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(d, 0o700); err != nil {
			return false, false, reason.New(reason.NotSetUp, "create %s: %w", d, err)
		}
		// MkdirAll applies the umask; make the mode exact.
		if err := os.Chmod(d, 0o700); err != nil {
			return false, false, reason.New(reason.NotSetUp, "create %s: %w", d, err)
		}
		return true, false, nil
	case err != nil:
		return false, false, reason.New(reason.NotSetUp, "inspect %s: %w", d, err)
	case !fi.IsDir():
		return false, false, reason.New(reason.NotSetUp, "%s exists and is not a directory", d)
	}
	if runtime.GOOS == "windows" {
		return false, false, nil
	}
	perm := fi.Mode().Perm()
	if perm&0o022 != 0 {
		return false, false, reason.New(reason.NotSetUp, "%s is writable by group or others (mode %04o): use a private directory (chmod 700 %s) and run setup again", d, perm, d)
	}
	return false, perm&0o077 != 0, nil
}

func printSetup(cmd *cobra.Command, res *setupResult) {
	w := cmd.OutOrStdout()
	for _, d := range res.CreatedDirs {
		fmt.Fprintf(w, "created   %s/\n", d)
	}
	for _, d := range res.OpenDirs {
		fmt.Fprintf(w, "note      %s/ is readable by group or others; chmod 700 it to keep packages and audit records private\n", d)
	}
	switch {
	case res.ConfigCreated:
		fmt.Fprintf(w, "created   %s (secure defaults)\n", res.Config)
	case len(res.AddedKeys) > 0:
		fmt.Fprintf(w, "updated   %s: added %d missing key(s) with defaults, kept every existing value:\n", res.Config, len(res.AddedKeys))
		for _, k := range res.AddedKeys {
			fmt.Fprintf(w, "            %s\n", k)
		}
	default:
		fmt.Fprintf(w, "unchanged %s (complete and valid)\n", res.Config)
	}
	switch {
	case res.SubIDsAdded:
		fmt.Fprintf(w, "reserved  subordinate ids %s for agentnode in %s and %s\n", res.SubIDs, subid.UIDFile, subid.GIDFile)
	case res.SubIDs != "":
		fmt.Fprintf(w, "unchanged subordinate ids %s for agentnode in %s and %s\n", res.SubIDs, subid.UIDFile, subid.GIDFile)
	default:
		fmt.Fprintf(w, "note      %s\n", res.SubIDsNote)
	}
	fmt.Fprintf(w, "agentnode is set up in %s\n", res.Home)
}
