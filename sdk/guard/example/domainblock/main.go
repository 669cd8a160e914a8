// Command agentnode-guard-domainblock is an example third-party Guard
// inspector, built only on sdk/ (see README.md): it denies a tool call when
// a string or key of the input holds a URL whose host is a blocked domain or
// a subdomain of one, and abstains otherwise.
//
// The blocklist is DefaultBlocked, or the file "<binary>.blocklist" next to
// the binary when it exists (one domain a line, # starts a comment): plugins
// get no environment from agentnode, so a file is their configuration.
package main

import (
	"os"
	"strings"

	"github.com/agentnode/agentnode/sdk/guard"
	"github.com/agentnode/agentnode/sdk/plugin"
)

// DefaultBlocked is the blocklist without a .blocklist file.
var DefaultBlocked = []string{"evil.example", "pastebin.com", "transfer.sh"}

func main() {
	blocked := DefaultBlocked
	if exe, err := os.Executable(); err == nil {
		if b, err := os.ReadFile(exe + ".blocklist"); err == nil {
			blocked = ParseBlocklist(string(b))
		}
	}
	guard.Serve(plugin.Info{Name: "domainblock", Kind: plugin.KindGuard, Version: "1.0.0"}, Inspector{Blocked: blocked})
}

// ParseBlocklist reads one domain a line, lower-cased; "#" starts a comment.
func ParseBlocklist(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		d, _, _ := strings.Cut(line, "#")
		if d = strings.ToLower(strings.TrimSpace(d)); d != "" {
			out = append(out, strings.TrimSuffix(d, "."))
		}
	}
	return out
}
