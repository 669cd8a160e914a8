// Package pkglist lists the installed package store (kernel/store) for the
// front ends that show it whole: `agentnode list`, `agentnode mcp status`
// and the catalogue of `agentnode mcp serve`. Each package is loaded exactly
// as the run path loads it (store.Get: meta.json, the installed manifest and
// its checks), several at a time, so a listing shows nothing a run would
// not find. It sits outside the kernel because no decision lists the store.
package pkglist

import (
	"errors"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/agentnode/agentnode/kernel/store"
)

// List returns the packages installed in s sorted by id. Packages that
// cannot be read are left out and reported in the error (in id order), so a
// caller can show the rest: a non-nil error may come with a non-empty list.
// A missing store is an empty one.
func List(s *store.Store) ([]*store.Package, error) {
	ents, err := os.ReadDir(s.Root()) // sorted by name
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") && store.CheckID(e.Name()) == nil {
			ids = append(ids, e.Name())
		}
	}
	pkgs := make([]*store.Package, len(ids))
	errs := make([]error, len(ids))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(ids)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(ids); i = int(next.Add(1) - 1) {
				pkgs[i], errs[i] = s.Get(ids[i])
			}
		})
	}
	wg.Wait()
	out := make([]*store.Package, 0, len(ids))
	for _, p := range pkgs {
		if p != nil {
			out = append(out, p)
		}
	}
	return out, errors.Join(errs...)
}
