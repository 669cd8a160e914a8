package hostexec

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A streaming run is a conversation: each line written to the tool's stdin
// is answered on its stdout while the tool keeps running, and closing the
// input ends it.
func TestStreamingConversation(t *testing.T) {
	pack := newPack(t, `while read -r l; do echo "got $l"; done; echo bye`)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	req := request(pack)
	req.StdinStream, req.StdoutStream = inR, outW
	type ran struct {
		res *Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := Run(context.Background(), req)
		_ = outW.Close()
		done <- ran{res, err}
	}()
	r := bufio.NewReader(outR)
	for _, msg := range []string{"one", "two", "three"} {
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil || line != "got "+msg+"\n" {
			t.Fatalf("answer to %s: %q, %v", msg, line, err)
		}
	}
	_ = inW.Close()
	if line, _ := r.ReadString('\n'); line != "bye\n" {
		t.Fatalf("after EOF: %q", line)
	}
	got := <-done
	if got.err != nil || got.res.ExitCode != 0 || len(got.res.Stdout) != 0 {
		t.Fatalf("run: %+v, %v", got.res, got.err)
	}
}

// When the reader of a streaming run stops reading, the tool is killed,
// also one that ignores its stdin, and Run returns.
func TestStreamingReaderGoneKillsTool(t *testing.T) {
	pack := newPack(t, `echo hello; while :; do echo more; sleep 0.01; done`)
	inR, inW := io.Pipe()
	defer inW.Close()
	outR, outW := io.Pipe()
	req := request(pack)
	req.StdinStream, req.StdoutStream = inR, outW
	done := make(chan *Result, 1)
	go func() {
		res, _ := Run(context.Background(), req)
		done <- res
	}()
	if line, err := bufio.NewReader(outR).ReadString('\n'); err != nil || line != "hello\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	_ = outR.CloseWithError(errors.New("reader gone"))
	select {
	case res := <-done:
		if res == nil || res.ExitCode != 137 {
			t.Fatalf("result %+v, want killed (137)", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its reader went away")
	}
}

// A script run through an interpreter outside the package needs no
// executable bit; the interpreter itself must be an absolute executable.
func TestInterpreter(t *testing.T) {
	pack := t.TempDir()
	if err := os.WriteFile(filepath.Join(pack, "tool.sh"), []byte(`echo "args: $0 $1"`), 0o644); err != nil {
		t.Fatal(err)
	}
	req := request(pack, "x")
	if _, err := Run(context.Background(), req); !errors.Is(err, ErrEntrypoint) {
		t.Fatalf("non-executable script without an interpreter: %v", err)
	}
	req.Interpreter = "/bin/sh"
	res, err := Run(context.Background(), req)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %+v, %v", res, err)
	}
	want := "args: " + filepath.Join(mustEval(t, pack), "tool.sh") + " x\n"
	if string(res.Stdout) != want {
		t.Fatalf("stdout %q, want %q", res.Stdout, want)
	}
	for _, bad := range []string{"sh", "/nonexistent/sh", pack} {
		req.Interpreter = bad
		if _, err := Run(context.Background(), req); !errors.Is(err, ErrEntrypoint) {
			t.Errorf("interpreter %q: %v", bad, err)
		}
	}
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
