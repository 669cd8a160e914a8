// Package guard is the plugin contract for Guard input inspectors: given one
// tool call (package, tool, declared action types and permissions, the input
// JSON and its schema, the environment and the trust level), say allow,
// prompt, deny or abstain. The kernel runs the configured inspectors in order;
// deny beats prompt beats allow and abstain has no say. Any error, including a
// malformed or unknown verdict, is a deny (fail closed).
package guard

import (
	"context"
	"errors"
	"fmt"
	"github.com/agentnode/agentnode/sdk/jsondepth"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/agentnode/agentnode/sdk/plugin"
	pb "github.com/agentnode/agentnode/sdk/proto/agentnodev1"
)

// Verdict is an inspector's answer.
type Verdict string

// Verdicts. Abstain means the inspector has no opinion on this call.
const (
	VerdictAllow   Verdict = "allow"
	VerdictPrompt  Verdict = "prompt"
	VerdictDeny    Verdict = "deny"
	VerdictAbstain Verdict = "abstain"
)

// Verdicts lists every valid verdict.
var Verdicts = []Verdict{VerdictAllow, VerdictPrompt, VerdictDeny, VerdictAbstain}

// Valid reports whether v is one of the Verdict constants.
func (v Verdict) Valid() bool {
	_, err := v.toProto()
	return err == nil
}

// ErrInvalidVerdict is wrapped by every error about a verdict that is not one
// of the Verdict constants (including VERDICT_UNSPECIFIED on the wire).
var ErrInvalidVerdict = errors.New("invalid guard verdict")

func (v Verdict) toProto() (pb.Verdict, error) {
	switch v {
	case VerdictAllow:
		return pb.Verdict_VERDICT_ALLOW, nil
	case VerdictPrompt:
		return pb.Verdict_VERDICT_PROMPT, nil
	case VerdictDeny:
		return pb.Verdict_VERDICT_DENY, nil
	case VerdictAbstain:
		return pb.Verdict_VERDICT_ABSTAIN, nil
	}
	return pb.Verdict_VERDICT_UNSPECIFIED, fmt.Errorf("%w %q", ErrInvalidVerdict, string(v))
}

func verdictFromProto(v pb.Verdict) (Verdict, error) {
	switch v {
	case pb.Verdict_VERDICT_ALLOW:
		return VerdictAllow, nil
	case pb.Verdict_VERDICT_PROMPT:
		return VerdictPrompt, nil
	case pb.Verdict_VERDICT_DENY:
		return VerdictDeny, nil
	case pb.Verdict_VERDICT_ABSTAIN:
		return VerdictAbstain, nil
	}
	return "", fmt.Errorf("%w %s (%d)", ErrInvalidVerdict, v.String(), int32(v))
}

// Permissions are the permissions the package's manifest declares.
type Permissions struct {
	NetworkLevel       string // none | restricted | unrestricted
	AllowedDomains     []string
	FilesystemLevel    string
	CodeExecutionLevel string
}

// Env describes the environment of the call. It carries booleans only, never
// names or values of secrets.
type Env struct {
	CI             bool
	Interactive    bool
	SecretsPresent bool
	Root           bool
}

// InspectRequest is one tool call to inspect.
type InspectRequest struct {
	PackageID       string
	Version         string
	Tool            string
	ActionTypes     []string
	Permissions     Permissions
	InputJSON       []byte // the tool input, a JSON document
	InputSchemaJSON []byte // the tool's input_schema, a JSON document
	Env             Env
	TrustLevel      string
	// SchemaCheck is the host's validation of InputJSON against
	// InputSchemaJSON; nil when the host did not validate (no schema, or a
	// host that does not). An inspector need not link a JSON Schema
	// validator of its own.
	SchemaCheck *SchemaCheck
	// Workspace is the user's workspace directory as the decision granted
	// it to this run (`--workspace`: absolute, symlink-free), "" when none
	// was granted. An absolute path inside it is one the tool may be
	// handed: it can reach that directory and nothing else of the user's.
	Workspace string
}

// SchemaCheck is the host's validation of a tool input against the tool's
// input schema (JSON Schema, draft 2020-12 unless $schema says otherwise;
// external $refs refused). See sdk/guard/schemacheck, which makes it.
type SchemaCheck struct {
	// Problem says why the schema itself was refused (not JSON, too large
	// or too deep, not an object or boolean, does not compile); then
	// there are no violations. It never quotes the schema.
	Problem string
	// Violations are the failed leaves ordered by location, at most
	// MaxSchemaViolations; Omitted counts the rest.
	Violations []SchemaViolation
	Omitted    int
}

// SchemaViolation is one failed schema keyword at one place of the input.
type SchemaViolation struct {
	// Location is the path of the offending value: object keys and array
	// indexes (decimal), outermost first; empty for the whole input.
	Location []string
	// Detail names the keyword and what it wants, never an input value.
	Detail string
}

// Limits on a tool's input schema, for the host's check and for inspectors
// that read the schema themselves: a larger or deeper schema is refused
// before it is parsed.
const (
	MaxSchemaBytes      = 1 << 20
	MaxSchemaDepth      = 64
	MaxSchemaViolations = 20
)

// SchemaTooBig says why raw, a tool's input schema, is refused before it
// is parsed: larger than MaxSchemaBytes, or objects and arrays nested
// deeper than MaxSchemaDepth. It returns "" for a schema within the limits.
func SchemaTooBig(raw []byte) string {
	if len(raw) > MaxSchemaBytes {
		return fmt.Sprintf("the input schema is larger than %d bytes", MaxSchemaBytes)
	}
	if _, over := jsondepth.Exceeds(raw, MaxSchemaDepth); over {
		return fmt.Sprintf("the input schema is nested deeper than %d", MaxSchemaDepth)
	}
	return ""
}

// InspectResponse is an inspector's verdict and why.
type InspectResponse struct {
	Verdict Verdict
	Reasons []string
}

// Inspector is implemented by Guard inspector plugins.
type Inspector interface {
	Inspect(ctx context.Context, req *InspectRequest) (*InspectResponse, error)
}

// GRPCPlugin adapts an Inspector to go-plugin. Impl and Info are used on the
// plugin side; the host uses a zero GRPCPlugin.
type GRPCPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl Inspector
	Info plugin.Info
}

// GRPCServer registers the Guard service.
func (p *GRPCPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterGuardServer(s, &server{InfoService: plugin.NewInfoService(plugin.KindGuard, p.Info), impl: p.Impl})
	return nil
}

// GRPCClient returns a *Client.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewClient(c), nil
}

// Serve runs impl as a Guard inspector plugin process. See plugin.Serve.
func Serve(info plugin.Info, impl Inspector) {
	plugin.Serve(&plugin.ServeConfig{Kind: plugin.KindGuard, Plugin: &GRPCPlugin{Impl: impl, Info: info}})
}

func requestToProto(req *InspectRequest) *pb.InspectRequest {
	return &pb.InspectRequest{
		PackageId:   req.PackageID,
		Version:     req.Version,
		Tool:        req.Tool,
		ActionTypes: req.ActionTypes,
		Permissions: &pb.Permissions{
			NetworkLevel:       req.Permissions.NetworkLevel,
			AllowedDomains:     req.Permissions.AllowedDomains,
			FilesystemLevel:    req.Permissions.FilesystemLevel,
			CodeExecutionLevel: req.Permissions.CodeExecutionLevel,
		},
		InputJson:       req.InputJSON,
		InputSchemaJson: req.InputSchemaJSON,
		Env: &pb.EnvContext{
			Ci:             req.Env.CI,
			Interactive:    req.Env.Interactive,
			SecretsPresent: req.Env.SecretsPresent,
			Root:           req.Env.Root,
		},
		TrustLevel:  req.TrustLevel,
		SchemaCheck: schemaCheckToProto(req.SchemaCheck),
		Workspace:   req.Workspace,
	}
}

func schemaCheckToProto(c *SchemaCheck) *pb.SchemaCheck {
	if c == nil {
		return nil
	}
	out := &pb.SchemaCheck{Problem: c.Problem, Omitted: uint32(max(0, c.Omitted))}
	for _, v := range c.Violations {
		out.Violations = append(out.Violations, &pb.SchemaViolation{Location: v.Location, Detail: v.Detail})
	}
	return out
}

func schemaCheckFromProto(c *pb.SchemaCheck) *SchemaCheck {
	if c == nil {
		return nil
	}
	out := &SchemaCheck{Problem: c.GetProblem(), Omitted: int(c.GetOmitted())}
	for _, v := range c.GetViolations() {
		out.Violations = append(out.Violations, SchemaViolation{Location: v.GetLocation(), Detail: v.GetDetail()})
	}
	return out
}

func requestFromProto(r *pb.InspectRequest) *InspectRequest {
	p, e := r.GetPermissions(), r.GetEnv()
	return &InspectRequest{
		PackageID:   r.GetPackageId(),
		Version:     r.GetVersion(),
		Tool:        r.GetTool(),
		ActionTypes: r.GetActionTypes(),
		Permissions: Permissions{
			NetworkLevel:       p.GetNetworkLevel(),
			AllowedDomains:     p.GetAllowedDomains(),
			FilesystemLevel:    p.GetFilesystemLevel(),
			CodeExecutionLevel: p.GetCodeExecutionLevel(),
		},
		InputJSON:       r.GetInputJson(),
		InputSchemaJSON: r.GetInputSchemaJson(),
		Env: Env{
			CI:             e.GetCi(),
			Interactive:    e.GetInteractive(),
			SecretsPresent: e.GetSecretsPresent(),
			Root:           e.GetRoot(),
		},
		TrustLevel:  r.GetTrustLevel(),
		SchemaCheck: schemaCheckFromProto(r.GetSchemaCheck()),
		Workspace:   r.GetWorkspace(),
	}
}

type server struct {
	plugin.InfoService
	unimplemented
	impl Inspector
}

// unimplemented keeps the generated defaults one level below
// plugin.InfoService, whose Info answers.
type unimplemented struct{ pb.UnimplementedGuardServer }

func (s *server) Inspect(ctx context.Context, r *pb.InspectRequest) (*pb.InspectResponse, error) {
	resp, err := s.impl.Inspect(ctx, requestFromProto(r))
	if err != nil {
		return nil, err
	}
	if resp == nil {
		return nil, errors.New("guard plugin returned no response")
	}
	v, err := resp.Verdict.toProto()
	if err != nil {
		return nil, fmt.Errorf("guard plugin: %w", err)
	}
	return &pb.InspectResponse{Verdict: v, Reasons: resp.Reasons}, nil
}

// Client is the host side of a Guard inspector plugin. It implements
// Inspector.
type Client struct {
	plugin.InfoClient // Info asks the plugin to describe itself.
	c                 pb.GuardClient
}

var _ Inspector = (*Client)(nil)

// NewClient wraps a gRPC connection to a Guard service.
func NewClient(cc grpc.ClientConnInterface) *Client { return newClient(pb.NewGuardClient(cc)) }

func newClient(c pb.GuardClient) *Client {
	return &Client{InfoClient: plugin.NewInfoClient(plugin.KindGuard, c), c: c}
}

// Inspect calls the plugin. A missing (VERDICT_UNSPECIFIED) or unknown verdict
// is an error wrapping ErrInvalidVerdict; the kernel denies on any error.
func (c *Client) Inspect(ctx context.Context, req *InspectRequest) (*InspectResponse, error) {
	if req == nil {
		return nil, errors.New("guard: nil InspectRequest")
	}
	resp, err := c.c.Inspect(ctx, requestToProto(req))
	if err != nil {
		return nil, fmt.Errorf("guard plugin: inspect: %w", err)
	}
	v, err := verdictFromProto(resp.GetVerdict())
	if err != nil {
		return nil, fmt.Errorf("guard plugin: %w", err)
	}
	return &InspectResponse{Verdict: v, Reasons: resp.GetReasons()}, nil
}
