package main

import (
	"context"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"

	"github.com/agentnode/agentnode/sdk/guard"
)

// urlRE finds "scheme://host..." in JSON text; a URL ends at a quote, white
// space or an escape, none of which a host may contain.
var urlRE = regexp.MustCompile(`(?i)[a-z][a-z0-9+.-]*://[^\s"'<>\\]+`)

// Inspector denies a call whose input holds a URL to a blocked domain (or a
// subdomain of one) in any string or key; otherwise it abstains. Reasons
// name the blocklist entry, never the input.
type Inspector struct{ Blocked []string }

// Inspect implements guard.Inspector.
func (in Inspector) Inspect(_ context.Context, req *guard.InspectRequest) (*guard.InspectResponse, error) {
	// Decode and encode again, so that escapes such as "\/" or "\u0065" in
	// the input cannot hide a URL from the search.
	var v any
	err := json.Unmarshal(req.InputJSON, &v)
	text, err2 := json.Marshal(v)
	if err != nil || err2 != nil {
		return &guard.InspectResponse{Verdict: guard.VerdictDeny, Reasons: []string{"the input is not JSON"}}, nil
	}
	var reasons []string
	for _, raw := range urlRE.FindAllString(string(text), -1) {
		u, err := url.Parse(raw)
		if err != nil { // fail closed: a URL we cannot read may point anywhere
			reasons = append(reasons, "a URL in the input does not parse")
			continue
		}
		host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
		for _, d := range in.Blocked {
			if host == d || strings.HasSuffix(host, "."+d) {
				reasons = append(reasons, "a URL in the input points to blocked domain "+d)
			}
		}
	}
	if len(reasons) > 0 {
		return &guard.InspectResponse{Verdict: guard.VerdictDeny, Reasons: reasons}, nil
	}
	return &guard.InspectResponse{Verdict: guard.VerdictAbstain}, nil
}
