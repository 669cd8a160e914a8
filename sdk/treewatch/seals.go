package treewatch

import (
	"fmt"
	"sync"
	"time"
)

// Seals remembers, for the life of a session, which trees were verified
// and have been watched unchanged since (Verify). The zero value is not
// usable; a nil *Seals verifies every time. Safe for concurrent use.
type Seals struct {
	mu     sync.Mutex
	closed bool
	trees  map[string]*seal // by root
}

// seal is one tree's watch and the key it was verified for.
type seal struct {
	mu       sync.Mutex // one verification of the tree at a time
	key      string
	w        *Watch    // nil: not verified, or not watchable (verified every time)
	verified time.Time // the last full verification
}

// MaxAge (a variable for tests) is how long a watched, unchanged tree is
// trusted without a full verification: what inotify cannot see (a write
// through a shared writable mapping made before the watch was armed) is
// found at the latest by the first call after it.
var MaxAge = time.Minute

// MaxTrees bounds the trees one Seals watches (one inotify instance each,
// of fs.inotify.max_user_instances, 128 by default); the trees beyond are
// verified in full every time.
const MaxTrees = 16

// NewSeals returns an empty set.
func NewSeals() *Seals { return &Seals{trees: map[string]*seal{}} }

// Verify runs verify, the full verification of the tree at root as it must
// be for key (an artifact hash), unless the tree was verified for key
// before and its watch has seen nothing since. Before a full verification
// it arms a new watch on the tree, kept when verify succeeds. A tree that
// cannot be watched is verified in full every time; a failed verify drops
// the watch, and its error then names what the watch saw change.
func (s *Seals) Verify(root, key string, verify func() error) error {
	if s == nil {
		return verify()
	}
	t := s.tree(root)
	if t == nil {
		return verify()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := ""
	if t.w != nil {
		changed = t.w.Tainted()
		if changed == "" && t.key == key {
			if time.Since(t.verified) < MaxAge {
				return nil
			}
			// Watched since before this verification: kept if it holds.
			if err := verify(); err != nil {
				t.w.Close()
				t.w, t.key = nil, ""
				return err
			}
			t.verified = time.Now()
			return nil
		}
		t.w.Close()
		t.w, t.key = nil, ""
	}
	start := time.Now()
	w, armErr := Arm(root)
	if err := verify(); err != nil {
		if w != nil {
			w.Close()
		}
		if changed != "" {
			return fmt.Errorf("%w (changed since it was verified: %s)", err, changed)
		}
		return err
	}
	if armErr != nil || w.Tainted() != "" {
		if w != nil {
			w.Close()
		}
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		w.Close()
		return nil
	}
	t.w, t.key, t.verified = w, key, start
	return nil
}

// tree is root's seal, made if there is room (nil otherwise).
func (s *Seals) tree(root string) *seal {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	t := s.trees[root]
	if t == nil && len(s.trees) < MaxTrees {
		t = &seal{}
		s.trees[root] = t
	}
	return t
}

// Watched reports whether root is verified and watched unchanged for key
// (tests, status).
func (s *Seals) Watched(root, key string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	t := s.trees[root]
	s.mu.Unlock()
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.w != nil && t.key == key && t.w.Tainted() == ""
}

// Close releases every watch; later Verify calls verify in full.
func (s *Seals) Close() {
	s.mu.Lock()
	s.closed = true
	trees := s.trees
	s.trees = map[string]*seal{}
	s.mu.Unlock()
	for _, t := range trees {
		t.mu.Lock()
		if t.w != nil {
			t.w.Close()
			t.w = nil
		}
		t.mu.Unlock()
	}
}
