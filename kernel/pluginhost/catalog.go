package pluginhost

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// Prefix starts the file name of every plugin binary:
// agentnode-<kind>-<name>.
const Prefix = "agentnode-"

// Key returns "<kind>-<name>", the key of a plugin in pins.json and the
// name used in messages.
func Key(kind, name string) string { return kind + "-" + name }

// FileName returns the binary name of a plugin: agentnode-<kind>-<name>.
func FileName(kind, name string) string { return Prefix + Key(kind, name) }

// ValidName reports whether name matches [a-z0-9][a-z0-9-]*.
func ValidName(name string) bool {
	if name == "" || name[0] == '-' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

func validKind(kind string) bool {
	for _, k := range plugin.Kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// DefaultBinDir returns the directory of the running agentnode executable,
// symlinks resolved. Bundled plugins live there.
func DefaultBinDir() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locate the agentnode executable: %w", err)
	}
	exe, err = filepath.EvalSymlinks(exe)
	if err != nil {
		return "", fmt.Errorf("resolve the agentnode executable: %w", err)
	}
	return filepath.Dir(exe), nil
}

// ErrNotRegular is the error of ResolveFile for a path that is not a
// regular file.
var ErrNotRegular = errors.New("not a regular file")

// ResolveFile returns the absolute, symlink-free path of a regular file.
func ResolveFile(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", path, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", path, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return real, fmt.Errorf("stat %s: %w", real, err)
	}
	if !fi.Mode().IsRegular() {
		return real, fmt.Errorf("%s: %w", real, ErrNotRegular)
	}
	return real, nil
}

// Lookup finds the file a launch runs for kind/name, in search order: the
// bin directory, then home.PluginsDir(homeDir) (homeDir "" skips it); in
// each, the file FileName(kind, name), resolved (ResolveFile). A
// directory, or a name that resolves to something other than a regular
// file, is passed over; any other failure to resolve the first file found
// is an error. found is false when neither directory holds one.
// `agentnode plugins list` (cmd/agentnode/plugincat) lists every file of
// both directories in the same order; a test there checks the two agree.
func Lookup(homeDir, binDir, kind, name string) (path string, found bool, err error) {
	dirs := []string{binDir}
	if homeDir != "" {
		dirs = append(dirs, home.PluginsDir(homeDir))
	}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, FileName(kind, name))
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return "", false, fmt.Errorf("read plugin directory %s: %w", dir, err)
		case fi.IsDir():
			continue
		}
		real, err := ResolveFile(p)
		if errors.Is(err, ErrNotRegular) {
			continue
		}
		if err != nil {
			return "", false, err
		}
		return real, true, nil
	}
	return "", false, nil
}

// CheckFileMode refuses a binary that someone else could replace between
// the pin check and exec: the file or its directory owned by a user other
// than root or us, the file writable by group or others, or its directory
// writable by them without the sticky bit.
func CheckFileMode(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if err := checkOwner(path, fi); err != nil {
		return err
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others (mode %v)", path, fi.Mode().Perm())
	}
	dir := filepath.Dir(path)
	di, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	if err := checkOwner(dir, di); err != nil {
		return err
	}
	if di.Mode().Perm()&0o022 != 0 && di.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("directory %s is writable by group or others (mode %v)", dir, di.Mode().Perm())
	}
	return nil
}

// checkOwner accepts files owned by root or by the effective user.
func checkOwner(path string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, neither root nor the current user", path, st.Uid)
	}
	return nil
}
