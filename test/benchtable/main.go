// Command benchtable is `make bench`: it runs agentnode's side-by-side
// benchmarks — each measures agentnode doing some work and the raw tool
// doing the same work in one run, interleaved — and prints one Markdown
// table of medians, ratios and goals, the table of the README's
// performance section.
//
// It lives in test/ beside the benchmarks it runs and is never built into
// agentnode. A row whose benchmark cannot run on this machine (no Docker,
// not root) says why; the command exits 1 when any row could not be
// measured, 0 otherwise (a missed goal is reported, not an error).
//
//	go run ./test/benchtable [-benchtime 20x] [-run REGEXP]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"
)

// row is one line of the table: a metric of agentnode's work, the raw
// counterpart's (if any), and the goal they are held to.
type row struct {
	work string
	// pkg and bench name the benchmark (an exact name, sub-benchmarks
	// with "/") that reports both metrics.
	pkg, bench string
	// an and raw are the units of the metrics reported by the benchmark
	// (ns/op, sec/op or ms values; "" raw: an absolute goal).
	an, raw string
	rawWork string
	goal    goal
}

// goal is what a row is held to: at most Over ms more than the raw
// counterpart, at most Ratio times it, at most Max ms, or (a rate, calls/s)
// at least AtLeast times the raw counterpart's.
type goal struct {
	over, ratio, max, atLeast float64
}

func (g goal) String() string {
	switch {
	case g.over > 0:
		return fmt.Sprintf("≤ raw + %g ms", g.over)
	case g.ratio > 0:
		return fmt.Sprintf("≤ %.2f×", g.ratio)
	case g.max > 0:
		return fmt.Sprintf("≤ %g ms", g.max)
	case g.atLeast > 0:
		return fmt.Sprintf("≥ %.2f×", g.atLeast)
	}
	return "—"
}

// met says whether an (and raw, in ms) meet the goal; ok is false for a
// row without one.
func (g goal) met(an, raw float64) (met, ok bool) {
	switch {
	case g.over > 0:
		return an <= raw+g.over, true
	case g.ratio > 0:
		return an <= raw*g.ratio, true
	case g.max > 0:
		return an <= g.max, true
	case g.atLeast > 0:
		return an >= raw*g.atLeast, true
	}
	return false, false
}

var rows = []row{
	{work: "curated tool on the host, cold `agentnode run`", pkg: "./test", bench: "BenchmarkColdRunSideBySide",
		an: "host-ms", raw: "direct-ms", rawWork: "the tool run directly", goal: goal{over: 10}},
	{work: "`agentnode run --dry-run` (decision only)", pkg: "./test", bench: "BenchmarkColdRunSideBySide",
		an: "dry-run-ms", goal: goal{max: 10}},
	{work: "`agentnode version`", pkg: "./test", bench: "BenchmarkColdRunSideBySide",
		an: "version-ms", goal: goal{max: 5}},
	{work: "community tool on libcontainer, cold `agentnode run`", pkg: "./test", bench: "BenchmarkColdRunSideBySide",
		an: "sandbox-ms", raw: "direct-ms", rawWork: "the tool run directly"},
	{work: "libcontainer backend, busybox `true`", pkg: "./plugins/sandbox/libcontainer", bench: "BenchmarkSideBySide",
		an: "libcontainer-ns/op", raw: "runc-run-ns/op", rawWork: "`runc run`, same bundle", goal: goal{ratio: 1.0}},
	{work: "Docker backend, busybox `true`", pkg: "./plugins/sandbox/docker", bench: "BenchmarkDockerSideBySide",
		an: "backend-ns/op", raw: "docker-run-ns/op", rawWork: "`docker run --rm -i`, same flags", goal: goal{ratio: 1.10}},
	{work: "Podman backend, busybox `true`", pkg: "./plugins/sandbox/podman", bench: "BenchmarkPodmanSideBySide",
		an: "backend-ns/op", raw: "podman-run-rm-ns/op", rawWork: "`podman run --rm -i`, same flags", goal: goal{ratio: 1.15}},
	{work: "Docker backend on gVisor, busybox `true`", pkg: "./plugins/sandbox/docker", bench: "BenchmarkDockerGVisorSideBySide",
		an: "backend-ns/op", raw: "docker-run-ns/op", rawWork: "`docker run --runtime runsc --rm -i`, same flags", goal: goal{ratio: 1.10}},
	{work: "Podman backend on gVisor, busybox `true`", pkg: "./plugins/sandbox/podman", bench: "BenchmarkPodmanGVisorSideBySide",
		an: "backend-ns/op", raw: "podman-run-rm-ns/op", rawWork: "`podman --runtime runsc run --rm -i`, same flags", goal: goal{ratio: 1.10}},
	{work: "community tool on Podman + gVisor, cold `agentnode run`", pkg: "./test", bench: "BenchmarkGVisorSideBySide",
		an: "podman-gvisor-ms", raw: "podman-runsc-raw-ms", rawWork: "`podman --runtime runsc run --rm`, the same tool", goal: goal{ratio: 1.10}},
	{work: "Python tool on the host (curated), `agentnode run`", pkg: "./test", bench: "BenchmarkPythonTool",
		an: "host-ms", raw: "direct-ms", rawWork: "`python3 -c` calling it", goal: goal{over: 30}},
	{work: "Python tool sandboxed (libcontainer), `agentnode run`", pkg: "./test", bench: "BenchmarkPythonTool",
		an: "sandbox-ms", raw: "direct-ms", rawWork: "`python3 -c` calling it", goal: goal{over: 60}},
	{work: "`list`, 1,000 packages", pkg: "./cmd/agentnode", bench: "BenchmarkCatalog/packages=1000/list",
		an: "sec/op", goal: goal{max: 50}},
	{work: "`mcp status`, 1,000 packages", pkg: "./cmd/agentnode", bench: "BenchmarkCatalog/packages=1000/mcp-status",
		an: "sec/op", goal: goal{max: 50}},
	{work: "`tools/list` in `mcp serve`, 1,000 packages", pkg: "./cmd/agentnode", bench: "BenchmarkCatalog/packages=1000/tools-list",
		an: "sec/op", goal: goal{max: 50}},
	{work: "curated host tool, `tools/call` through one `mcp serve`, 1 caller", pkg: "./test", bench: "BenchmarkMCPServeClients",
		an: "c1-ms", raw: "direct-ms", rawWork: "the tool run directly", goal: goal{over: 3}},
	{work: "the same, 4 callers at once: p90 against p50", pkg: "./test", bench: "BenchmarkMCPServeClients",
		an: "c4-p90-ms", raw: "c4-ms", rawWork: "p50, 4 callers", goal: goal{ratio: 2}},
	{work: "the same, calls/s with 2 callers", pkg: "./test", bench: "BenchmarkMCPServeClients",
		an: "c2-calls/s", raw: "c1-calls/s", rawWork: "1 caller"},
	{work: "the same, calls/s with 4 callers (2 cores)", pkg: "./test", bench: "BenchmarkMCPServeClients",
		an: "c4-calls/s", raw: "c1-calls/s", rawWork: "1 caller", goal: goal{atLeast: 1.8}},
	{work: "the same, CPU time of serve, its plugins and the tool per call", pkg: "./test", bench: "BenchmarkMCPServeClients",
		an: "cpu-ms/call"},
}

func main() {
	benchtime := flag.String("benchtime", "20x", "the -benchtime of each benchmark")
	only := flag.String("run", "", "measure only the rows whose work matches this regular expression")
	flag.Parse()
	var filter *regexp.Regexp
	if *only != "" {
		var err error
		if filter, err = regexp.Compile(*only); err != nil {
			fmt.Fprintf(os.Stderr, "benchtable: -run: %v\n", err)
			os.Exit(2)
		}
	}
	// One `go test` per package with all its benchmarks, so the rows that
	// share a benchmark share its run.
	want := map[string][]string{}
	var pkgs []string
	for _, r := range rows {
		if filter != nil && !filter.MatchString(r.work) {
			continue
		}
		if _, ok := want[r.pkg]; !ok {
			pkgs = append(pkgs, r.pkg)
		}
		want[r.pkg] = append(want[r.pkg], r.bench)
	}
	results := map[string]map[string]float64{} // bench -> unit -> value
	failed := map[string]string{}              // pkg -> why
	for _, pkg := range pkgs {
		fmt.Fprintf(os.Stderr, "benchtable: %s: %s\n", pkg, strings.Join(want[pkg], " "))
		out, err := runBench(pkg, want[pkg], *benchtime)
		if err != nil {
			failed[pkg] = err.Error()
		}
		if perr := parse(out, results); perr != nil && err == nil {
			failed[pkg] = perr.Error()
		}
	}
	fmt.Println("| Work | agentnode | Raw counterpart, same work | Ratio / overhead | Goal | |")
	fmt.Println("|---|---|---|---|---|---|")
	missing := false
	for _, r := range rows {
		if filter != nil && !filter.MatchString(r.work) {
			continue
		}
		an, ok := value(results, r.bench, r.an)
		if !ok {
			why := failed[r.pkg]
			if why == "" {
				why = "metric " + r.an + " not reported"
			}
			missing = true
			fmt.Printf("| %s | not measured: %s | | | %s | |\n", r.work, why, r.goal)
			continue
		}
		raw, rawOK := 0.0, false
		if r.raw != "" {
			raw, rawOK = value(results, r.bench, r.raw)
		}
		rawCell, ratio := "—", "—"
		if rawOK {
			rawCell = fmt.Sprintf("%s: %s", r.rawWork, msText(raw, r.raw))
			ratio = fmt.Sprintf("%+.1f ms (%.2f×)", an-raw, an/raw)
			if isRate(r.an) {
				ratio = fmt.Sprintf("%.2f×", an/raw)
			}
		}
		verdict := ""
		if met, ok := r.goal.met(an, raw); ok && (rawOK || r.raw == "") {
			verdict = "met"
			if !met {
				verdict = "**missed**"
			}
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", r.work, msText(an, r.an), rawCell, ratio, r.goal, verdict)
	}
	if missing {
		os.Exit(1)
	}
}

// msText shows a time in ms: a median where the benchmark reports one
// (sideBySide's "-ms" metrics), else the mean of its iterations.
func msText(ms float64, unit string) string {
	if isRate(unit) {
		return fmt.Sprintf("%.0f calls/s", ms)
	}
	f := "%.0f ms"
	if ms < 10 {
		f = "%.1f ms"
	}
	if !strings.HasSuffix(unit, "-ms") {
		f += " (mean)"
	}
	return fmt.Sprintf(f, ms)
}

// isRate says whether a metric is a rate (calls/s), not a time.
func isRate(unit string) bool { return strings.HasSuffix(unit, "/s") }

// runBench runs the named benchmarks of pkg once each and returns their
// output; stderr and the output go to this process's stderr as well.
func runBench(pkg string, benches []string, benchtime string) ([]byte, error) {
	pattern := benchPattern(benches)
	cmd := exec.Command("go", "test", "-tags", "seccomp", "-run", "^$", "-bench", pattern,
		"-benchtime", benchtime, "-count", "1", "-timeout", "60m", pkg)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, os.Stderr)
	cmd.Stderr = os.Stderr
	err := cmd.Run()
	if err != nil {
		return out.Bytes(), fmt.Errorf("go test -bench %s %s: %w", pattern, pkg, err)
	}
	return out.Bytes(), nil
}

// benchPattern is a -bench pattern that selects exactly the named
// benchmarks: -bench matches each "/"-separated level with its own
// regular expression, so each level is an alternation of the names at it
// (a sub-benchmark name at the second level applies to every top-level
// benchmark matched, which is what the rows here need).
func benchPattern(benches []string) string {
	var levels []map[string]bool
	for _, b := range benches {
		for i, part := range strings.Split(b, "/") {
			if i == len(levels) {
				levels = append(levels, map[string]bool{})
			}
			levels[i][part] = true
		}
	}
	var out []string
	for _, lv := range levels {
		var alts []string
		for name := range lv {
			alts = append(alts, regexp.QuoteMeta(name))
		}
		slices.Sort(alts)
		out = append(out, "^("+strings.Join(alts, "|")+")$")
	}
	return strings.Join(out, "/")
}

// parse reads `go test -bench` output into results: for each benchmark
// (its name without the -GOMAXPROCS suffix), each unit's value, in ms for
// time units.
func parse(out []byte, results map[string]map[string]float64) error {
	rd := benchfmt.NewReader(bytes.NewReader(out), "go test")
	for rd.Scan() {
		res, ok := rd.Result().(*benchfmt.Result)
		if !ok {
			continue
		}
		// benchfmt names a result without "Benchmark"; the -GOMAXPROCS
		// suffix is dropped here.
		name := "Benchmark" + string(res.Name.Full())
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i]
		}
		m := results[name]
		if m == nil {
			m = map[string]float64{}
			results[name] = m
		}
		for _, v := range res.Values {
			m[v.Unit] = v.Value
			if v.OrigUnit != "" {
				m[v.OrigUnit] = v.OrigValue
			}
		}
	}
	return rd.Err()
}

// value is a benchmark's metric in ms.
func value(results map[string]map[string]float64, bench, unit string) (float64, bool) {
	v, ok := results[bench][unit]
	if !ok {
		return 0, false
	}
	switch {
	case strings.HasSuffix(unit, "ns/op"):
		return v / 1e6, true
	case unit == "sec/op":
		return v * 1e3, true
	}
	return v, true
}
