package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agentnode/agentnode/kernel/manifest"
)

// cmdPytestPack runs a Python pack's own pytest suite twice with the
// pytest plugin test/pyroute/agentnode_route.py: once calling its tool
// functions directly in Python, once with every call of a function that a
// tool of its manifest names sent through `agentnode run PKG TOOL` (the
// installed package, under the script's AGENTNODE_HOME). Both runs must
// pass and make the same tool calls, at least one:
//
//	pytest-pack PACK_DIR [DIR...]
//
// PACK_DIR is the pack's source (its tests/ and the modules the tests
// import in-process); DIRs go first on sys.path in both runs (for example
// a directory its dependencies are installed in). Prints "routed N calls:
// TOOL…" for stdout checks.
func cmdPytestPack(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! pytest-pack")
	}
	if len(args) < 1 {
		ts.Fatalf("usage: pytest-pack PACK_DIR [DIR...]")
	}
	pack := ts.MkAbs(args[0])
	m, err := manifest.Load(pack)
	ts.Check(err)
	type route struct {
		Tool     string  `json:"tool"`
		Module   string  `json:"module"`
		Function *string `json:"function"`
	}
	var tools []route
	for _, t := range m.Tools {
		mod, fn, colon := strings.Cut(t.Entrypoint, ":")
		r := route{Tool: t.Name, Module: mod}
		switch {
		case t.FromPackage && !colon:
			// The shim's --package-entrypoint: the callable named like
			// the tool, else run; the plugin decides after the import.
		case colon:
			r.Function = &fn
		default:
			run := "run"
			r.Function = &run
		}
		tools = append(tools, r)
	}
	toolsJSON, err := json.Marshal(tools)
	ts.Check(err)
	path := []string{}
	for _, d := range args[1:] {
		path = append(path, ts.MkAbs(d))
	}
	if fi, err := os.Stat(filepath.Join(pack, "src")); err == nil && fi.IsDir() {
		path = append(path, filepath.Join(pack, "src"))
	} else {
		path = append(path, pack)
	}
	plugin, err := filepath.Abs(filepath.Join("pyroute"))
	ts.Check(err)
	calls := map[string][]string{}
	for _, mode := range []string{"direct", "route"} {
		log := filepath.Join(ts.MkAbs("."), "pytest-"+mode+".log")
		_ = os.Remove(log)
		cmd := exec.Command("/usr/bin/python3", "-m", "pytest", "-q", "-p", "agentnode_route", "-p", "no:cacheprovider",
			filepath.Join(pack, "tests"))
		cmd.Dir = pack
		cmd.Env = []string{
			"PATH=" + ts.Getenv("PATH"),
			"HOME=" + ts.Getenv("HOME"),
			"AGENTNODE_HOME=" + ts.Getenv("AGENTNODE_HOME"),
			"AGENTNODE_NON_INTERACTIVE=1",
			"PYTHONPATH=" + plugin,
			"PYTHONDONTWRITEBYTECODE=1",
			"AGENTNODE_ROUTE_MODE=" + mode,
			"AGENTNODE_ROUTE_TOOLS=" + string(toolsJSON),
			"AGENTNODE_ROUTE_PACK=" + m.PackageID,
			"AGENTNODE_ROUTE_BIN=" + filepath.Join(ts.Getenv("BIN"), "agentnode"),
			"AGENTNODE_ROUTE_PATH=" + strings.Join(path, string(os.PathListSeparator)),
			"AGENTNODE_ROUTE_LOG=" + log,
		}
		for _, k := range passEnv {
			if v := ts.Getenv(k); v != "" {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
		}
		out, err := cmd.CombinedOutput()
		ts.Logf("pytest (%s):\n%s", mode, out)
		if err != nil {
			ts.Fatalf("the pack's pytest suite failed with its tool calls %s: %v", map[string]string{"direct": "made directly", "route": "sent through agentnode run"}[mode], err)
		}
		data, err := os.ReadFile(log)
		if err != nil && !os.IsNotExist(err) {
			ts.Fatalf("%v", err)
		}
		calls[mode] = strings.Fields(string(data))
	}
	if len(calls["direct"]) == 0 {
		ts.Fatalf("the pack's tests call none of its tools")
	}
	if !slices.Equal(calls["direct"], calls["route"]) {
		ts.Fatalf("tool calls differ: direct %v, routed %v", calls["direct"], calls["route"])
	}
	fmt.Fprintf(ts.Stdout(), "routed %d calls: %s\n", len(calls["route"]), strings.Join(calls["route"], " "))
}
