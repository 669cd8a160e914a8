// Package ratelimit is agentnode's persistent per-package rate limiter.
//
// Every `agentnode run` is its own process, so the windows live on disk, in
// one bbolt file under AGENTNODE_HOME/state (home.RateLimitPath), shared by
// every agentnode process of that home. Each package has three exact sliding
// windows — a burst per second, a per-minute and a per-hour limit — kept as
// the timestamps of its admitted calls of the last hour (at most PerHour of
// them). Admit checks the three windows and records the call in one bbolt
// read-write transaction; bbolt holds an exclusive flock on the file for the
// whole transaction, so concurrent processes never over-admit.
//
// Why bbolt and not a flock'd JSON file: it gives atomic, fsync'd
// transactions, a flock with a bounded wait (Options.LockTimeout), and
// checksummed meta pages, and a denied call costs no write at all (the
// transaction rolls back).
//
// Failing closed: a state file that cannot be opened, is locked for longer
// than the lock timeout, or is corrupt (not a bbolt file, truncated, missing
// its format marker, a window whose checksum or order is wrong) refuses every
// call with reason code rate_limited and a message naming the file. The file
// is never reset or repaired silently: a user removes it explicitly to reset
// every package's windows.
//
// Limits (AgentNode's Guard defaults, README.md): toolpacks 60/min, 1000/h, burst 10/s; agents
// 120/min, 2000/h, burst 20/s; Guard's strict mode caps any limit at 30/min
// and 500/h (it only tightens; the burst keeps its value). guard.rate_limits
// replaces the defaults for one package (see Resolve).
//
// It is in the trusted core because a rate limit is one of the decision's
// stages.
package ratelimit
