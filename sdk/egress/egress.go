package egress

import (
	"net/netip"
	"time"

	"github.com/agentnode/agentnode/kernel/reason"
)

// Decision is what an Event records.
type Decision string

// Decisions. Every connection yields exactly one Allow or Deny before any
// byte reaches a destination; an allowed one yields Closed when it ends.
const (
	Allow  Decision = "allow"
	Deny   Decision = "deny"
	Closed Decision = "closed"
)

// Event is one audit record of the proxy. It never carries payload.
type Event struct {
	Time     time.Time
	Decision Decision
	// Code is reason.EgressDenied for Deny, "" otherwise.
	Code reason.Code
	// Host is the requested host: lower-cased when the target parsed,
	// otherwise the raw request host cut to 255 printable bytes ("" when no
	// request was read).
	Host string
	// Port is the requested port, 0 when none parsed.
	Port int
	// Addr is, on Allow, the first checked address (the one tried first);
	// on Closed, the address actually connected (invalid if none
	// answered); on a Deny for a non-public address, that address; invalid
	// otherwise.
	Addr netip.Addr
	// Reason says why, in words; on Closed how the tunnel ended (or why
	// no destination address could be connected).
	Reason string
	// BytesOut (to the destination) and BytesIn (from it) are set on Closed.
	BytesOut, BytesIn int64
	// Duration is the tunnel's lifetime, set on Closed.
	Duration time.Duration
}

// Err returns the refusal as an error carrying reason.EgressDenied, or nil
// for an event that is not a Deny.
func (e Event) Err() error {
	if e.Decision != Deny {
		return nil
	}
	if e.Host != "" {
		return reason.New(reason.EgressDenied, "egress to %s:%d refused: %s", e.Host, e.Port, e.Reason)
	}
	return reason.New(reason.EgressDenied, "egress refused: %s", e.Reason)
}
