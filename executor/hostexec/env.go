package hostexec

import "strings"

// DefaultPath is the PATH every host tool gets. The agentnode process's own
// PATH is never passed on: it may name user-writable directories (~/bin,
// ./node_modules/.bin, ".") whose shims a tool would then run, and it makes
// a tool's behaviour depend on the caller's shell.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// allowedEnvKeys are the variables AllowedEnv passes on, by exact name.
// Nothing else passes: no credentials (API keys, tokens), no AGENTNODE_*
// settings, and no variable that points at a socket or daemon
// (SSH_AUTH_SOCK, DBUS_SESSION_BUS_ADDRESS, DOCKER_HOST, XDG_RUNTIME_DIR,
// ...), which would hand the tool the user's agents and services.
var allowedEnvKeys = []string{"LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM"}

// AllowedEnv returns the environment a host tool may inherit from environ
// (as from os.Environ): PATH=DefaultPath, then LANG, LC_ALL, LC_CTYPE, TZ
// and TERM when present, in that order. For a name given more than once the
// first value wins, as with getenv(3) and os.Getenv. Run adds HOME, TMPDIR
// and PACK_DIR.
func AllowedEnv(environ []string) []string {
	out := make([]string, 0, 1+len(allowedEnvKeys))
	out = append(out, "PATH="+DefaultPath)
	for _, key := range allowedEnvKeys {
		for _, kv := range environ {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k != key {
				continue
			}
			if !strings.ContainsRune(v, 0) {
				out = append(out, kv)
			}
			break
		}
	}
	return out
}
