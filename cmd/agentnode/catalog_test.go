package main

import (
	"os"
	"slices"
	"testing"

	"github.com/agentnode/agentnode/kernel/home"
)

// verdictNames lists the verdict cache of homeDir (kernel/validcache).
func verdictNames(t *testing.T, homeDir string) []string {
	t.Helper()
	ents, err := os.ReadDir(home.VerdictsDir(homeDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestCatalogValidatesOnce: `list` and `mcp status` validate each installed
// manifest against the schema once, then take its verdict from the cache:
// a listing after the first validates nothing, so its work is linear in
// the packages (a cache smaller than the store would evict verdicts while
// the store is read, and validate every manifest on every listing).
func TestCatalogValidatesOnce(t *testing.T) {
	const n = 300
	dir := catalogHome(t, n)
	for _, args := range [][]string{{"list"}, {"mcp", "status"}} {
		if code, _, errOut := runCLIBench(args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		first := verdictNames(t, dir)
		if len(first) < n {
			t.Fatalf("%v: %d verdicts for %d installed manifests: some were not kept", args, len(first), n)
		}
		if code, _, errOut := runCLIBench(args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		if again := verdictNames(t, dir); !slices.Equal(first, again) {
			t.Fatalf("%v: the second listing changed the verdict cache (%d -> %d entries): it validated again", args, len(first), len(again))
		}
	}
}
