package dispatch

import (
	"context"
	"fmt"

	"github.com/agentnode/agentnode/sdk/guard"
	"github.com/agentnode/agentnode/sdk/guard/schemacheck"
)

// inputChecker validates tool inputs against their input schemas for the
// inspectors (guard.InspectRequest.SchemaCheck). Compiled schemas are kept
// across calls of a long-running kernel (mcp serve).
var inputChecker = schemacheck.NewChecker(64)

// inputCheck is the validation of one request's input, run in the
// background from the artifact stage (when the tool is known) so that it
// overlaps the plugin starts, and awaited by the inspectors stage.
type inputCheck struct {
	done   chan struct{}
	result *guard.SchemaCheck
	err    error
}

// startInputCheck begins validating input against schema.
func startInputCheck(schema, input []byte) *inputCheck {
	c := &inputCheck{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer func() {
			if p := recover(); p != nil {
				c.result, c.err = nil, fmt.Errorf("internal error while validating the input against the input schema: %v", p)
			}
		}()
		c.result = inputChecker.Check(schema, input)
	}()
	return c
}

// wait returns the check's result, or an error when it failed or ctx ended
// first.
func (c *inputCheck) wait(ctx context.Context) (*guard.SchemaCheck, error) {
	select {
	case <-c.done:
		return c.result, c.err
	case <-ctx.Done():
		return nil, fmt.Errorf("validating the input against the input schema: %w", ctx.Err())
	}
}
