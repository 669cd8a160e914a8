package audit_test

import (
	"github.com/agentnode/agentnode/cmd/agentnode/auditverify"
	"github.com/agentnode/agentnode/kernel/audit"
)

// The verifier for this package's tests (verifier_test.go).
func init() {
	audit.VerifyHook = func(dir string) (any, error) { return auditverify.Verify(dir) }
	audit.VerifyAnchoredHook = func(dir string, a *audit.Anchor) (any, error) { return auditverify.VerifyAnchored(dir, a) }
	audit.ReanchorHook = func(dir string, a *audit.Anchor) (any, error) { return auditverify.Reanchor(dir, a) }
	audit.TailHook = auditverify.Tail
}
