package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/agentnode/agentnode/sdk/guard"
)

// Limits of the structural rules (AgentNode's argument inspection).
const (
	// MaxPayloadBytes is the largest input document allowed (1 MiB, the
	// tool I/O input bound).
	MaxPayloadBytes = 1 << 20
	// MaxStringChars is the longest string allowed, in Unicode code points.
	MaxStringChars = 1_000_000
	// MaxDepth is the deepest nesting of objects and arrays allowed; a
	// top-level object is depth 1.
	MaxDepth = 20
	// MaxKeys is the largest total number of object keys allowed.
	MaxKeys = 10_000
	// MaxReasons caps the reasons of one response; the rest are counted.
	MaxReasons = 20
)

// Rule names, stable strings used at the start of every reason.
const (
	ruleMalformed     = "malformed_input"
	ruleInvalidSchema = "invalid_schema"
	rulePayload       = "payload_too_large"
	ruleString        = "string_too_long"
	ruleDepth         = "nesting_too_deep"
	ruleKeys          = "too_many_keys"
	ruleDuplicateKey  = "duplicate_key"
	ruleTraversal     = "path_traversal"
	ruleAbsolute      = "absolute_path"
	ruleURL           = "url_without_network"
	ruleSecret        = "secret_in_input"
	ruleShell         = "shell_token"
	ruleSchema        = "schema_violation"
)

type severity int

const (
	sevPrompt severity = iota + 1
	sevDeny
)

// finding is one rule that matched at one place of the input. Neither field
// ever holds (part of) an input value.
type finding struct {
	sev    severity
	rule   string
	path   string // JSON path ($, $.a, $.a[0]); empty for the whole input
	detail string
}

func (f finding) String() string {
	s := f.rule
	if f.path != "" {
		s += " at " + f.path
	}
	if f.detail != "" {
		s += ": " + f.detail
	}
	return s
}

// findings collects findings, dropping exact repeats.
type findings struct {
	list    []finding
	seen    map[finding]bool
	omitted int // findings counted but not listed (prompt level)
}

func (fs *findings) add(sev severity, rule, path, detail string) {
	f := finding{sev: sev, rule: rule, path: path, detail: detail}
	if fs.seen == nil {
		fs.seen = make(map[finding]bool)
	}
	if fs.seen[f] {
		return
	}
	fs.seen[f] = true
	fs.list = append(fs.list, f)
}

func (fs *findings) deny(rule, path, detail string)   { fs.add(sevDeny, rule, path, detail) }
func (fs *findings) prompt(rule, path, detail string) { fs.add(sevPrompt, rule, path, detail) }

func (fs *findings) denied() bool {
	for _, f := range fs.list {
		if f.sev == sevDeny {
			return true
		}
	}
	return false
}

// response turns the findings into a verdict: deny beats prompt, and with
// nothing found the call is allowed. Deny findings are listed first.
func (fs *findings) response() *guard.InspectResponse {
	verdict := guard.VerdictAllow
	var reasons []string
	for _, sev := range []severity{sevDeny, sevPrompt} {
		for _, f := range fs.list {
			if f.sev != sev {
				continue
			}
			if verdict == guard.VerdictAllow {
				verdict = guard.VerdictPrompt
				if sev == sevDeny {
					verdict = guard.VerdictDeny
				}
			}
			reasons = append(reasons, f.String())
		}
	}
	if total := len(reasons) + fs.omitted; total > MaxReasons {
		if len(reasons) > MaxReasons-1 {
			reasons = reasons[:MaxReasons-1]
		}
		reasons = append(reasons, "and "+strconv.Itoa(total-len(reasons))+" more findings")
	}
	return &guard.InspectResponse{Verdict: verdict, Reasons: reasons}
}

// Inspector is the builtin argument inspector. The zero value is not usable;
// use NewInspector. It is safe for concurrent use.
type Inspector struct {
	schemas *schemaCache
}

var _ guard.Inspector = (*Inspector)(nil)

// NewInspector returns an Inspector with an empty schema cache.
func NewInspector() *Inspector { return &Inspector{schemas: newSchemaCache(64)} }

// Inspect implements guard.Inspector. It never returns an error for bad
// input (that is a deny); it returns one only when ctx ends. A panic is turned
// into a deny, so one bad request cannot take the plugin down.
func (in *Inspector) Inspect(ctx context.Context, req *guard.InspectRequest) (resp *guard.InspectResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			resp, err = &guard.InspectResponse{
				Verdict: guard.VerdictDeny,
				Reasons: []string{"inspector_error: internal error while inspecting the input"},
			}, nil
		}
	}()
	if req == nil {
		return &guard.InspectResponse{Verdict: guard.VerdictDeny, Reasons: []string{ruleMalformed + ": no request"}}, nil
	}
	return in.inspect(ctx, req)
}

// inspect is Inspect without the panic guard (the fuzz test calls it).
func (in *Inspector) inspect(ctx context.Context, req *guard.InspectRequest) (*guard.InspectResponse, error) {
	var fs findings

	schema, problem := in.schemas.get(req.InputSchemaJSON)
	if problem == "" && schema != nil && req.SchemaCheck != nil {
		problem = req.SchemaCheck.Problem // e.g. it does not compile
	}
	if problem != "" {
		fs.deny(ruleInvalidSchema, "", problem)
		schema = nil
	}

	input := req.InputJSON
	switch {
	case len(input) > MaxPayloadBytes:
		fs.deny(rulePayload, "$", fmt.Sprintf("the input is larger than %d bytes", MaxPayloadBytes))
		return fs.response(), nil
	case len(bytes.TrimSpace(input)) == 0:
		fs.deny(ruleMalformed, "", "the input is empty, not a JSON document")
		return fs.response(), nil
	}

	lk := newLookup(schema)
	w := walker{
		ctx:         ctx,
		fs:          &fs,
		schema:      schema,
		lookup:      lk,
		networkNone: networkNone(req.Permissions.NetworkLevel),
		workspace:   req.Workspace,
	}
	complete, err := w.walk(input)
	if err != nil {
		return nil, err
	}
	if !complete {
		// A structural limit stopped the walk, or the input is not JSON:
		// already a deny, and the rest of the input is not looked at.
		return fs.response(), nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if schema != nil && !fs.denied() {
		validate(req.SchemaCheck, lk, input, &fs)
	}
	return fs.response(), nil
}

// networkNone reports whether the package may not use the network. Anything
// but an explicit "restricted" or "unrestricted" counts as none (fail
// closed): an empty or unknown level never widens what is allowed.
func networkNone(level string) bool {
	return level != "restricted" && level != "unrestricted"
}
