package hostexec

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentnode/agentnode/executor/toolio"
)

// echoToolSrc is a minimal protocol tool: it answers the request line with
// {"ok":true,"result":REQUEST}.
const echoToolSrc = `package main

import (
	"bufio"
	"bytes"
	"os"
)

func main() {
	line, _ := bufio.NewReader(os.Stdin).ReadBytes('\n')
	out := append([]byte(` + "`" + `{"ok":true,"result":` + "`" + `), bytes.TrimSpace(line)...)
	os.Stdout.Write(append(out, "}\n"...))
}
`

// buildEchoTool compiles echoToolSrc into a fresh package directory holding
// the executable "echo-tool" (the Go build cache makes repeated builds cheap).
func buildEchoTool(b *testing.B) string {
	b.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		b.Skipf("no go toolchain to build the echo tool: %v", err)
	}
	dir := b.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte(echoToolSrc), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(goBin, "build", "-o", filepath.Join(dir, "echo-tool"), src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=on", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build the echo tool: %v: %s", err, out)
	}
	return dir
}

func benchRequest(b *testing.B) []byte {
	b.Helper()
	in, err := toolio.EncodeRequest("echo", json.RawMessage(`{"q":"benchmark","n":42}`))
	if err != nil {
		b.Fatal(err)
	}
	return in
}

// BenchmarkRunTrivial measures Run of a trivial compiled tool, protocol
// decode included: what host placement costs per call.
func BenchmarkRunTrivial(b *testing.B) {
	dir := buildEchoTool(b)
	in := benchRequest(b)
	req := &Request{PackageDir: dir, Entrypoint: "echo-tool", Stdin: in, Env: AllowedEnv(os.Environ())}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := Run(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if r, err := toolio.DecodeResponse(res.Stdout); err != nil || !r.OK {
			b.Fatalf("response %q: %v", res.Stdout, err)
		}
	}
}

// BenchmarkOSExec is the baseline: plain os/exec of the same binary with the
// same stdin and environment, no work dir, process group or limits.
func BenchmarkOSExec(b *testing.B) {
	dir := buildEchoTool(b)
	in := benchRequest(b)
	env := AllowedEnv(os.Environ())
	bin := filepath.Join(dir, "echo-tool")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin)
		cmd.Stdin = bytes.NewReader(in)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Env = env
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		if r, err := toolio.DecodeResponse(stdout.Bytes()); err != nil || !r.OK {
			b.Fatalf("response %q: %v", stdout.Bytes(), err)
		}
	}
}

// BenchmarkRunConfined is BenchmarkRunTrivial confined (capabilities
// dropped, Landlock, seccomp, network none): the difference is what
// confinement costs per host call.
func BenchmarkRunConfined(b *testing.B) {
	dir := buildEchoTool(b)
	in := benchRequest(b)
	req := &Request{PackageDir: dir, Entrypoint: "echo-tool", Stdin: in, Env: AllowedEnv(os.Environ()),
		Confine: &Confinement{Mode: "required"}}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := Run(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if r, err := toolio.DecodeResponse(res.Stdout); err != nil || !r.OK || res.Confinement != "" {
			b.Fatalf("response %q (%q): %v", res.Stdout, res.Confinement, err)
		}
	}
}
