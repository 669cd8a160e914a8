// Package opabench sets Guard's policy engine (kernel/policy) side by side
// with OPA evaluating an equivalent Rego policy (default and strict tables,
// guard.<action>, per-tool overrides, critical risk). It is a separate Go
// module so that the main module's build and CI never compile OPA:
//
//	make bench-opa    # cd test/opabench && go test -bench . -benchmem
package opabench
