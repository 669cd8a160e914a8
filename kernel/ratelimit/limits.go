package ratelimit

import (
	"fmt"
	"time"
)

// Limit is the rate limit of one package. Every field must be at least 1.
type Limit struct {
	// Burst is the most calls admitted in any one second.
	Burst int64 `json:"burst"`
	// PerMinute is the most calls admitted in any 60 seconds.
	PerMinute int64 `json:"per_minute"`
	// PerHour is the most calls admitted in any hour. It also bounds how
	// many timestamps are kept per package.
	PerHour int64 `json:"per_hour"`
}

// Built-in limits (AgentNode's Guard defaults, README.md).
var (
	// Toolpack is the default for toolpacks (and every package type that
	// is not an agent).
	Toolpack = Limit{Burst: 10, PerMinute: 60, PerHour: 1000}
	// Agent is the default for agents.
	Agent = Limit{Burst: 20, PerMinute: 120, PerHour: 2000}
	// Strict caps PerMinute and PerHour in Guard's strict mode. Its Burst
	// is not a cap: the facts name none, so strict keeps the burst.
	Strict = Limit{PerMinute: 30, PerHour: 500}
)

// Default returns the built-in limit for a package type (toolpack, agent,
// mcp_server).
func Default(packageType string) Limit {
	if packageType == "agent" {
		return Agent
	}
	return Toolpack
}

// Resolve returns the effective limit of a package: the configured override
// if there is one (guard.rate_limits), else the built-in limit of its type;
// a field the override leaves 0 takes the built-in limit of the type (the
// AgentNode SDK's entries may name only some of the three). In strict mode
// PerMinute and PerHour are then capped at Strict's (strict only ever
// tightens, like its policy ignores per-tool overrides).
func Resolve(packageType string, override *Limit, strict bool) Limit {
	l := Default(packageType)
	if override != nil {
		if override.Burst != 0 {
			l.Burst = override.Burst
		}
		if override.PerMinute != 0 {
			l.PerMinute = override.PerMinute
		}
		if override.PerHour != 0 {
			l.PerHour = override.PerHour
		}
	}
	if strict {
		l.PerMinute = min(l.PerMinute, Strict.PerMinute)
		l.PerHour = min(l.PerHour, Strict.PerHour)
	}
	return l
}

// Validate reports a field below 1.
func (l Limit) Validate() error {
	for _, w := range l.Windows() {
		if w.Max < 1 {
			return fmt.Errorf("rate limit %s must be at least 1, got %d", w.Field, w.Max)
		}
	}
	return nil
}

// Window is one sliding window of a Limit.
type Window struct {
	// Span is the window's length.
	Span time.Duration
	// Max is the most calls admitted in any Span.
	Max int64
	// Unit names the window in messages ("second", "minute", "hour").
	Unit string
	// Field is the config key of Max.
	Field string
}

// Windows returns the three windows, shortest first.
func (l Limit) Windows() [3]Window {
	return [3]Window{
		{Span: time.Second, Max: l.Burst, Unit: "second", Field: "burst"},
		{Span: time.Minute, Max: l.PerMinute, Unit: "minute", Field: "per_minute"},
		{Span: time.Hour, Max: l.PerHour, Unit: "hour", Field: "per_hour"},
	}
}

func (l Limit) String() string {
	return fmt.Sprintf("%d/s, %d/min, %d/h", l.Burst, l.PerMinute, l.PerHour)
}
