package dispatch

import (
	"context"

	"github.com/agentnode/agentnode/kernel/reason"
)

// stageRateLimit enforces guard.rate_limits. Persistent rate limits arrive
// with the Guard issue; until then a configured limit cannot be honoured and
// refuses.
func stageRateLimit(_ context.Context, st *state) error {
	if len(st.set.rateLimits) > 0 {
		return reason.New(reason.RateLimited, "guard.rate_limits is set but rate limiting is %w", errStageUnavailable)
	}
	return nil
}
