package guardtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/agentnode/agentnode/sdk/guard"
	"github.com/agentnode/agentnode/sdk/guard/guardtest"
	"github.com/agentnode/agentnode/sdk/plugin"
	pb "github.com/agentnode/agentnode/sdk/proto/agentnodev1"
)

// exampleInspector is a small rule-based inspector: malformed input and root
// are denied, "rm -rf" is denied, execute with secrets present prompts, pure
// reads are allowed, everything else abstains. It remembers the last request.
type exampleInspector struct {
	mu   sync.Mutex
	last *guard.InspectRequest
}

func (e *exampleInspector) Inspect(_ context.Context, req *guard.InspectRequest) (*guard.InspectResponse, error) {
	e.mu.Lock()
	e.last = req
	e.mu.Unlock()
	var in any
	if err := json.Unmarshal(req.InputJSON, &in); err != nil {
		return &guard.InspectResponse{Verdict: guard.VerdictDeny, Reasons: []string{"input is not JSON"}}, nil
	}
	if req.Env.Root {
		return &guard.InspectResponse{Verdict: guard.VerdictDeny, Reasons: []string{"running as root"}}, nil
	}
	if m, ok := in.(map[string]any); ok {
		if cmd, _ := m["command"].(string); strings.Contains(cmd, "rm -rf") {
			return &guard.InspectResponse{Verdict: guard.VerdictDeny, Reasons: []string{"command", "recursive delete"}}, nil
		}
	}
	if slices.Contains(req.ActionTypes, "execute") && req.Env.SecretsPresent {
		return &guard.InspectResponse{Verdict: guard.VerdictPrompt, Reasons: []string{"execute with secrets present"}}, nil
	}
	if len(req.ActionTypes) > 0 && !slices.ContainsFunc(req.ActionTypes, func(a string) bool { return a != "read" }) {
		return &guard.InspectResponse{Verdict: guard.VerdictAllow}, nil
	}
	return &guard.InspectResponse{Verdict: guard.VerdictAbstain}, nil
}

func (e *exampleInspector) lastRequest() *guard.InspectRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

var info = plugin.Info{Name: "example", Version: "0.1.0"}

func TestRunCasesYAML(t *testing.T) {
	c := guardtest.Connect(t, info, &exampleInspector{})
	guardtest.RunCases(t, c, filepath.Join("testdata", "cases.yaml"))
}

func TestRunCasesJSON(t *testing.T) {
	c := guardtest.Connect(t, info, &exampleInspector{})
	guardtest.RunCases(t, c, filepath.Join("testdata", "cases.json"))
}

func TestInfo(t *testing.T) {
	c := guardtest.Connect(t, info, &exampleInspector{})
	got, err := c.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := plugin.Info{Name: "example", Kind: plugin.KindGuard, Version: "0.1.0", APIVersions: []uint32{1}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Info = %+v, want %+v", got, want)
	}
}

func TestRequestRoundTrip(t *testing.T) {
	impl := &exampleInspector{}
	c := guardtest.Connect(t, info, impl)
	req := &guard.InspectRequest{
		PackageID:   "pkg-a",
		Version:     "1.0.0",
		Tool:        "t",
		ActionTypes: []string{"read", "network_egress"},
		Permissions: guard.Permissions{
			NetworkLevel: "restricted", AllowedDomains: []string{"a.example", "b.example"},
			FilesystemLevel: "read", CodeExecutionLevel: "none",
		},
		InputJSON:       []byte(`{"q":"x"}`),
		InputSchemaJSON: []byte(`{"type":"object"}`),
		Env:             guard.Env{CI: true, Interactive: true, SecretsPresent: true, Root: false},
		TrustLevel:      "trusted",
	}
	resp, err := c.Inspect(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Verdict != guard.VerdictAbstain {
		t.Errorf("verdict %q, want abstain", resp.Verdict)
	}
	if got := impl.lastRequest(); !reflect.DeepEqual(got, req) {
		t.Fatalf("plugin got\n%+v\nwant\n%+v", got, req)
	}
}

func TestReasonsRoundTrip(t *testing.T) {
	c := guardtest.Connect(t, info, &exampleInspector{})
	resp, err := c.Inspect(t.Context(), &guard.InspectRequest{InputJSON: []byte(`{"command":"rm -rf ~"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Verdict != guard.VerdictDeny || !reflect.DeepEqual(resp.Reasons, []string{"command", "recursive delete"}) {
		t.Fatalf("got %+v", resp)
	}
}

type fixedInspector struct {
	resp *guard.InspectResponse
	err  error
}

func (f fixedInspector) Inspect(context.Context, *guard.InspectRequest) (*guard.InspectResponse, error) {
	return f.resp, f.err
}

func TestPluginSideErrors(t *testing.T) {
	for name, impl := range map[string]fixedInspector{
		"unknown verdict": {resp: &guard.InspectResponse{Verdict: "maybe"}},
		"empty verdict":   {resp: &guard.InspectResponse{}},
		"nil response":    {},
		"error":           {err: errors.New("inspector broke")},
	} {
		t.Run(name, func(t *testing.T) {
			c := guardtest.Connect(t, info, impl)
			resp, err := c.Inspect(t.Context(), &guard.InspectRequest{})
			if err == nil {
				t.Fatalf("Inspect succeeded with %+v, want an error", resp)
			}
			if impl.err != nil && !strings.Contains(err.Error(), impl.err.Error()) {
				t.Errorf("error %q does not carry the plugin's error", err)
			}
		})
	}
}

// rawGuard is a Guard server that sends whatever verdict number it is told,
// as a misbehaving third-party plugin could.
type rawGuard struct {
	pb.UnimplementedGuardServer
	verdict pb.Verdict
}

func (r rawGuard) Inspect(context.Context, *pb.InspectRequest) (*pb.InspectResponse, error) {
	return &pb.InspectResponse{Verdict: r.verdict, Reasons: []string{"raw"}}, nil
}

func TestClientRejectsMalformedVerdicts(t *testing.T) {
	for _, tc := range []struct {
		v    pb.Verdict
		want guard.Verdict // "" means an error is expected
	}{
		{pb.Verdict_VERDICT_UNSPECIFIED, ""},
		{pb.Verdict(42), ""},
		{pb.Verdict(-1), ""},
		{pb.Verdict_VERDICT_ALLOW, guard.VerdictAllow},
		{pb.Verdict_VERDICT_PROMPT, guard.VerdictPrompt},
		{pb.Verdict_VERDICT_DENY, guard.VerdictDeny},
		{pb.Verdict_VERDICT_ABSTAIN, guard.VerdictAbstain},
	} {
		t.Run(tc.v.String(), func(t *testing.T) {
			conn, srv := goplugin.TestGRPCConn(t, func(s *grpc.Server) { pb.RegisterGuardServer(s, rawGuard{verdict: tc.v}) })
			t.Cleanup(func() { _ = conn.Close(); srv.Stop() })
			resp, err := guard.NewClient(conn).Inspect(t.Context(), &guard.InspectRequest{})
			if tc.want == "" {
				if !errors.Is(err, guard.ErrInvalidVerdict) {
					t.Fatalf("got %+v, %v; want an error wrapping ErrInvalidVerdict", resp, err)
				}
				return
			}
			if err != nil || resp.Verdict != tc.want {
				t.Fatalf("got %+v, %v; want %q", resp, err, tc.want)
			}
		})
	}
}

func TestCheckReportsMismatches(t *testing.T) {
	c := guardtest.Connect(t, info, &exampleInspector{})
	base := guardtest.Case{Name: "x", ActionTypes: []string{"read"}, Input: map[string]any{"path": "p"}}
	for name, tc := range map[string]struct {
		mod     func(*guardtest.Case)
		wantErr string
	}{
		"match":          {func(c *guardtest.Case) { c.Want = guard.VerdictAllow }, ""},
		"wrong verdict":  {func(c *guardtest.Case) { c.Want = guard.VerdictDeny }, `verdict "allow", want "deny"`},
		"missing reason": {func(c *guardtest.Case) { c.Want = guard.VerdictAllow; c.WantReason = "nope" }, `no reason contains "nope"`},
		"both inputs": {func(c *guardtest.Case) {
			c.Want = guard.VerdictAllow
			s := "{}"
			c.InputJSON = &s
		}, "not both"},
	} {
		t.Run(name, func(t *testing.T) {
			cs := base
			tc.mod(&cs)
			err := guardtest.Check(t.Context(), c, cs)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Check error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseCasesRejectsBadFiles(t *testing.T) {
	for name, tc := range map[string]struct{ data, wantErr string }{
		"empty":          {"cases: []", "no cases"},
		"unknown key":    {"cases:\n  - name: a\n    want: allow\n    wnat: deny\n", "wnat"},
		"bad verdict":    {"cases:\n  - name: a\n    want: maybe\n", "not a verdict"},
		"missing want":   {"cases:\n  - name: a\n", "not a verdict"},
		"no name":        {"cases:\n  - want: allow\n", "no name"},
		"duplicate name": {"cases:\n  - {name: a, want: allow}\n  - {name: a, want: deny}\n", "duplicate"},
		"both inputs":    {"cases:\n  - {name: a, want: allow, input: {}, input_json: '{}'}\n", "not both"},
		"not yaml":       {"cases: [", "parse"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := guardtest.ParseCases([]byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ParseCases error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseCasesInputEncoding(t *testing.T) {
	cases, err := guardtest.ParseCases([]byte(`cases:
  - name: a
    want: allow
    input: {b: [1, 2.5, "s", null, true], a: {c: x}}
    input_schema_json: '{"type": "object"}'
  - name: raw
    want: deny
    input_json: '{"broken": '
`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := cases[0].Request()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(r.InputJSON), `{"a":{"c":"x"},"b":[1,2.5,"s",null,true]}`; got != want {
		t.Errorf("input JSON %s, want %s", got, want)
	}
	if got := string(r.InputSchemaJSON); got != `{"type": "object"}` {
		t.Errorf("input schema JSON %s", got)
	}
	r, err = cases[1].Request()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.InputJSON); got != `{"broken": ` {
		t.Errorf("raw input %q", got)
	}
}
