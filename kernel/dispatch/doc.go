// Package dispatch is the kernel's fail-closed pipeline. One function,
// (*Kernel).Run, owns the order of the stages (README.md, Architecture):
//
//	config → lockfile integrity → installed artifact hash → trust (plugin) →
//	minimum trust → placement → Guard policy → rate limit → inspector plugins →
//	prompt → audit decision record (fsync) → execute → audit outcome record
//
// Each stage is a small function on *state that either returns nil or an
// error carrying a reason code. An error, a panic or a timeout in any stage is
// a deny with a reason code and an audit record; there is no path from a
// failed stage to execution.
package dispatch
