package sandbox

import "fmt"

// Runtimes: what isolates a sandboxed process (Spec.Runtime).
const (
	// RuntimeNative is the host kernel behind namespaces, cgroups, seccomp
	// and dropped capabilities (runc, or the engine's default runtime).
	RuntimeNative = "native"
	// RuntimeGVisor is gVisor's runsc: the process talks to gVisor's
	// kernel (the Sentry), a second kernel between it and the host's.
	RuntimeGVisor = "gvisor"
)

// ReasonRuntimeMissing: the backend cannot run under the requested
// runtime (runsc missing or not registered with the engine, or a backend
// that has no such mode). The host refuses the run
// (sandbox_runtime_unavailable); it never runs it under another runtime.
const ReasonRuntimeMissing = "runtime_missing"

// NormalizeRuntime maps "" to RuntimeNative and checks the name.
func NormalizeRuntime(rt string) (string, error) {
	switch rt {
	case "", RuntimeNative:
		return RuntimeNative, nil
	case RuntimeGVisor:
		return RuntimeGVisor, nil
	}
	return "", fmt.Errorf("sandbox: unknown runtime %q (want %s or %s)", rt, RuntimeNative, RuntimeGVisor)
}

// RuntimeFor is the runtime of a sandboxed run of a package of trust tier
// tier: byTrust[tier] when set (sandbox.runtime_by_trust), else def
// (sandbox.runtime), else native.
func RuntimeFor(tier, def string, byTrust map[string]string) string {
	if rt, ok := byTrust[tier]; ok && rt != "" {
		return rt
	}
	if def != "" {
		return def
	}
	return RuntimeNative
}

// runtimeRefusal is the unavailability answer for a backend that did not
// confirm the runtime asked for (resp.Runtime), or nil when it did or
// when it is unavailable anyway.
func runtimeRefusal(asked string, resp *AvailabilityResponse) *AvailabilityResponse {
	want, err := NormalizeRuntime(asked)
	if err != nil {
		return &AvailabilityResponse{Reason: ReasonRuntimeMissing, Detail: err.Error()}
	}
	got, err := NormalizeRuntime(resp.Runtime)
	if !resp.Available || err == nil && got == want {
		return nil
	}
	return &AvailabilityResponse{Reason: ReasonRuntimeMissing,
		Detail: fmt.Sprintf("the backend did not confirm runtime %s (it answered %q)", want, resp.Runtime)}
}

// RuntimeSupport is the optional capability of a backend that runs under a
// runtime other than native. The plugin-side adapter refuses a Run whose
// Spec.Runtime is not native unless the backend implements it and
// SupportsRuntime says yes: a backend written before runtimes existed
// refuses a gVisor run instead of running it natively. Availability still
// says whether the runtime is usable now (runsc installed, registered).
type RuntimeSupport interface {
	SupportsRuntime(runtime string) bool
}

// checkRunRuntime is the adapter's check of a Run's runtime.
func checkRunRuntime(impl Backend, rt string) error {
	rt, err := NormalizeRuntime(rt)
	if err != nil || rt == RuntimeNative {
		return err
	}
	if s, ok := impl.(RuntimeSupport); ok && s.SupportsRuntime(rt) {
		return nil
	}
	return fmt.Errorf("sandbox: %s: this backend does not run under runtime %s", ReasonRuntimeMissing, rt)
}
