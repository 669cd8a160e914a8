package dispatch

import (
	"context"

	"github.com/agentnode/agentnode/kernel/config"
	"github.com/agentnode/agentnode/kernel/home"
	"github.com/agentnode/agentnode/kernel/ratelimit"
)

// stageRateLimit admits the call against the package's persistent sliding
// windows (kernel/ratelimit): guard.rate_limits for the package if set, else
// the built-in limit of its type, capped in strict mode. It always runs —
// there is no "unlimited". Every call that reaches this stage and is
// admitted counts, even if a later stage (an inspector, the prompt) refuses
// it; a refused call does not count. A dry run checks without recording. A
// full window, or a state file that is locked too long, unreadable or
// corrupt, denies with rate_limited.
func stageRateLimit(ctx context.Context, st *state) error {
	lim := effectiveRateLimit(st.set, st.pkg.ID, st.pkg.Manifest.PackageType)
	s := ratelimit.New(home.RateLimitPath(st.k.HomeDir), ratelimit.Options{Now: st.k.now})
	if st.req.DryRun {
		return s.Check(ctx, st.pkg.ID, lim)
	}
	return s.Admit(ctx, st.pkg.ID, lim)
}

// effectiveRateLimit is the limit of one package under the settings: its
// guard.rate_limits entry, else the entry "default", else none; what the
// entry leaves out is the built-in limit of the package's type.
func effectiveRateLimit(set *settings, pkgID, pkgType string) ratelimit.Limit {
	var override *ratelimit.Limit
	if l, ok := set.rateLimits[pkgID]; ok {
		override = &l
	} else if l, ok := set.rateLimits[config.DefaultRateLimit]; ok {
		override = &l
	}
	return ratelimit.Resolve(pkgType, override, set.guardStrict)
}

// rateLimitsFrom converts guard.rate_limits, in either form (a field the
// entry leaves out is 0).
func rateLimitsFrom(c map[string]config.RateLimit) map[string]ratelimit.Limit {
	m := make(map[string]ratelimit.Limit, len(c))
	for pkg, l := range c {
		burst, perMinute, perHour := l.Effective()
		m[pkg] = ratelimit.Limit{Burst: burst, PerMinute: perMinute, PerHour: perHour}
	}
	return m
}
