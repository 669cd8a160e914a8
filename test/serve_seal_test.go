package test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestNodeMCPServeSealedTree: the installed tree of server-memory, kept
// running in the libcontainer sandbox behind `mcp serve --package`, is
// verified once and then watched (sdk/treewatch), not re-hashed on every
// call. From the attacker's side: each change made to the tree between
// two calls — a file written, a file added, one renamed, one chmodded, a
// directory replaced, and a write through a hard link made beforehand
// outside the tree — is refused at the next call with artifact_mismatch
// naming the changed path, and the server started from the tree is
// stopped (its process gone); once the tree is as installed again, the
// next call is answered by a new server.
func TestNodeMCPServeSealedTree(t *testing.T) {
	e := newMCPEnv(t)
	nodeSandboxEnv(t, e)
	installed := installedContent(t, e, "memory-mcp")
	dist := "node_modules/@modelcontextprotocol/server-memory/dist"
	index := filepath.Join(installed, dist, "index.js")
	// The attacker's hard link, made before the session verified the tree.
	link := filepath.Join(t.TempDir(), "kept-link.js")
	if err := os.Link(index, link); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(index)
	if err != nil {
		t.Fatal(err)
	}
	mode := fi.Mode().Perm() // the executable bit is hashed: flipped, the tree differs
	ws := workspace(t)
	cs, _, stderr := e.serveArgs(t, nil, "--package", "memory-mcp", "--workspace", ws)
	directResult(t, cs, "create_entities", memoryEntities)
	want := directResult(t, cs, "read_graph", "{}")
	pids := serverPIDs(t, ws)
	if len(pids) != 1 {
		t.Fatalf("the kept server's processes: %v", pids)
	}

	write := func(name string) func() {
		return func() {
			f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
			if err == nil {
				_, err = f.WriteString("\nconsole.error('tampered');\n")
				err = errors.Join(err, f.Close())
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	restoreIndex := func() {
		if err := os.Truncate(index, int64(len(orig))); err != nil {
			t.Fatal(err)
		}
	}
	attacks := []struct {
		name, path string
		do, undo   func()
	}{
		{"write a file", dist + "/index.js", write(index), restoreIndex},
		{"add a file", dist + "/evil.js", func() { mustDo(t, os.WriteFile(filepath.Join(installed, dist, "evil.js"), []byte("1"), 0o444)) },
			func() { mustDo(t, os.Remove(filepath.Join(installed, dist, "evil.js"))) }},
		{"rename a file", dist + "/index.js", func() { mustDo(t, os.Rename(index, index+".moved")) },
			func() { mustDo(t, os.Rename(index+".moved", index)) }},
		{"chmod a file", dist + "/index.js", func() { mustDo(t, os.Chmod(index, mode^0o111)) },
			func() { mustDo(t, os.Chmod(index, mode)) }},
		{"replace a directory", dist, func() {
			d := filepath.Join(installed, dist)
			mustDo(t, os.Rename(d, d+".old"))
			mustDo(t, exec.Command("cp", "-a", d+".old", d).Run())
			write(filepath.Join(d, "index.js"))()
		}, func() {
			d := filepath.Join(installed, dist)
			mustDo(t, os.RemoveAll(d))
			mustDo(t, os.Rename(d+".old", d))
		}},
		{"write through a hard link made beforehand", dist + "/index.js", write(link), restoreIndex},
	}
	for _, a := range attacks {
		a.do()
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_graph", Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		text := resultText(r)
		if !r.IsError || !strings.HasPrefix(text, "deny artifact_mismatch:") || !strings.Contains(text, "changed since it was verified: "+a.path) {
			t.Fatalf("%s: the next call: %s\nstderr: %s", a.name, text, stderr)
		}
		if left := serverPIDs(t, ws); len(left) != 0 {
			t.Fatalf("%s: refused, but the server started from the tree still runs: %v", a.name, left)
		}
		a.undo()
		if got := directResult(t, cs, "read_graph", "{}"); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: after restoring the tree: %v, want %v", a.name, got, want)
		}
		now := serverPIDs(t, ws)
		if len(now) != 1 || now[0] == pids[0] {
			t.Fatalf("%s: after restoring, the server's processes are %v (before: %v)", a.name, now, pids)
		}
		pids = now
		t.Logf("%s: %s", a.name, text)
	}
}

// serverPIDs are the processes of server-memory (node /pack/server.mjs)
// whose mounts include workspace ws: the sandboxed server of this test's
// session, not another test's.
func serverPIDs(t testing.TB, ws string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	unique := filepath.Base(filepath.Dir(filepath.Dir(ws))) // t.TempDir's per-test directory
	var pids []int
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), "/pack/server.mjs") {
			continue
		}
		mounts, err := os.ReadFile(filepath.Join("/proc", d.Name(), "mountinfo"))
		if err == nil && strings.Contains(string(mounts), unique) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func mustDo(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestMCPServeSealedToolpack: a curated toolpack on the confined host
// behind `mcp serve`: its installed tree, sealed at the first call, is
// changed between two calls (a file of it written, then a file added) and
// the next call is refused with artifact_mismatch naming the path; with
// the tree as installed again, the tool runs again.
func TestMCPServeSealedToolpack(t *testing.T) {
	e := curatedEnv(t)
	installed := installedContent(t, e, "mcp-tools")
	cs, _, _ := e.serve(t, nil)
	if r := callTool(t, cs, "mcp-tools__echo", map[string]any{"x": 1}); r.IsError {
		t.Fatalf("echo: %s", resultText(r))
	}
	fail := filepath.Join(installed, "bin", "fail")
	orig, err := os.ReadFile(fail)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []struct {
		path     string
		do, undo func()
	}{
		{"bin/fail", func() { mustDo(t, os.WriteFile(fail, []byte("#!/bin/sh\necho evil\n"), 0o755)) },
			func() { mustDo(t, os.WriteFile(fail, orig, 0o755)) }},
		{"bin/evil", func() { mustDo(t, os.WriteFile(filepath.Join(installed, "bin", "evil"), nil, 0o444)) },
			func() { mustDo(t, os.Remove(filepath.Join(installed, "bin", "evil"))) }},
	} {
		a.do()
		r := callTool(t, cs, "mcp-tools__echo", map[string]any{"x": 1})
		if text := resultText(r); !r.IsError || !strings.HasPrefix(text, "deny artifact_mismatch:") ||
			!strings.Contains(text, "changed since it was verified: "+a.path) {
			t.Fatalf("%s changed: %s", a.path, text)
		}
		a.undo()
		if r := callTool(t, cs, "mcp-tools__echo", map[string]any{"x": 1}); r.IsError {
			t.Fatalf("%s restored: %s", a.path, resultText(r))
		}
	}
}
