// Package testeval is a deterministic trust.Evaluator shared by the SDK's
// subprocess tests (through sdk/internal/testplugin) and its in-process
// benchmarks, so both measure the same work.
package testeval

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentnode/agentnode/sdk/trust"
)

// Issuer is the issuer every answer names.
const Issuer = "testeval"

// Evaluator answers verified for a package with at least one attestation and
// unknown otherwise. The reason echoes the request so that callers can check
// it crossed the wire intact. PackageID "error" makes it fail.
type Evaluator struct{}

// Evaluate implements trust.Evaluator.
func (Evaluator) Evaluate(_ context.Context, req *trust.EvaluateRequest) (*trust.EvaluateResponse, error) {
	if req.PackageID == "error" {
		return nil, errors.New("testeval: asked to fail")
	}
	level := trust.LevelUnknown
	if len(req.Attestations) > 0 {
		level = trust.LevelVerified
	}
	return &trust.EvaluateResponse{
		Level:         level,
		Issuer:        Issuer,
		Reason:        fmt.Sprintf("%s@%s %s keys=%d", req.PackageID, req.Version, req.ArtifactHash, len(req.Keys)),
		ExpiresAtUnix: req.NowUnix + 3600,
	}, nil
}
