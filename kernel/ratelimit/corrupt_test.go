package ratelimit

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agentnode/agentnode/kernel/reason"
)

// validFile returns a store whose file holds real windows.
func validFile(t *testing.T) *Store {
	t.Helper()
	s, c := newStore(t)
	for _, pkg := range []string{"acme-pack", "other-pack"} {
		admitN(t, s, pkg, Toolpack, 3)
		c.Add(time.Second)
	}
	return s
}

// rewriteBolt changes the file with bbolt itself (a well-formed file with
// the wrong content).
func rewriteBolt(t *testing.T, path string, f func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(f); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptStateDeniesAndIsLeftAlone(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, s *Store)
		want   string
	}{
		{"not a bbolt file", func(t *testing.T, s *Store) {
			writeFile(t, s.path, bytes.Repeat([]byte("this is not a database\n"), 1000))
		}, "invalid database"},
		{"empty file", func(t *testing.T, s *Store) {
			writeFile(t, s.path, nil)
		}, "empty"},
		{"truncated", func(t *testing.T, s *Store) {
			fi, _ := os.Stat(s.path)
			if err := os.Truncate(s.path, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"a window's byte flipped on disk", func(t *testing.T, s *Store) {
			b, err := os.ReadFile(s.path)
			if err != nil {
				t.Fatal(err)
			}
			ts := stored(t, s, "acme-pack")
			enc := encodeWindow("acme-pack", ts)
			// Copy-on-write leaves stale copies in free pages: flip every one.
			n := 0
			for off := 0; ; n++ {
				i := bytes.Index(b[off:], enc)
				if i < 0 {
					break
				}
				b[off+i+5] ^= 0x40
				off += i + len(enc)
			}
			if n == 0 {
				t.Fatal("window not found in the file")
			}
			writeFile(t, s.path, b)
		}, "checksum mismatch"},
		{"a window of the wrong length", func(t *testing.T, s *Store) {
			rewriteBolt(t, s.path, func(tx *bolt.Tx) error {
				return tx.Bucket(windowsBucket).Put([]byte("other-pack"), []byte("short"))
			})
		}, `window of "other-pack"`},
		{"a window moved to another package", func(t *testing.T, s *Store) {
			v := encodeWindow("acme-pack", []int64{1, 2})
			rewriteBolt(t, s.path, func(tx *bolt.Tx) error {
				return tx.Bucket(windowsBucket).Put([]byte("other-pack"), v)
			})
		}, "checksum mismatch"},
		{"timestamps out of order", func(t *testing.T, s *Store) {
			v := encodeWindow("other-pack", []int64{5, 3})
			rewriteBolt(t, s.path, func(tx *bolt.Tx) error {
				return tx.Bucket(windowsBucket).Put([]byte("other-pack"), v)
			})
		}, "out of order"},
		{"another program's bbolt file", func(t *testing.T, s *Store) {
			rewriteBolt(t, s.path, func(tx *bolt.Tx) error { return tx.DeleteBucket(metaBucket) })
		}, "no format marker"},
		{"unknown format", func(t *testing.T, s *Store) {
			rewriteBolt(t, s.path, func(tx *bolt.Tx) error {
				return tx.Bucket(metaBucket).Put(formatKey, []byte("agentnode-ratelimit/99"))
			})
		}, "unknown format"},
		{"windows bucket missing", func(t *testing.T, s *Store) {
			rewriteBolt(t, s.path, func(tx *bolt.Tx) error { return tx.DeleteBucket(windowsBucket) })
		}, "no windows bucket"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := validFile(t)
			c.damage(t, s)
			before, err := os.ReadFile(s.path)
			if err != nil {
				t.Fatal(err)
			}
			for name, call := range map[string]func(context.Context, string, Limit) error{"Admit": s.Admit, "Check": s.Check} {
				err := call(context.Background(), "acme-pack", Toolpack)
				if !errors.Is(err, ErrCorrupt) || !errors.Is(err, reason.ErrRateLimited) {
					t.Fatalf("%s on a damaged file: %v", name, err)
				}
				msg := err.Error()
				if !strings.Contains(msg, c.want) || !strings.Contains(msg, s.path) || !strings.Contains(msg, "rm "+s.path) {
					t.Fatalf("%s: message %q should name the damage (%q), the file and how to reset it", name, msg, c.want)
				}
			}
			after, err := os.ReadFile(s.path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Fatal("the damaged state file was changed")
			}
			// Removing it explicitly is the way back.
			if err := os.Remove(s.path); err != nil {
				t.Fatal(err)
			}
			admitN(t, s, "acme-pack", Toolpack, 1)
		})
	}
}

func TestUnreadableStateDenies(t *testing.T) {
	t.Run("state file is a directory", func(t *testing.T) {
		s, _ := newStore(t)
		if err := os.MkdirAll(s.path, 0o700); err != nil {
			t.Fatal(err)
		}
		for name, call := range map[string]func(context.Context, string, Limit) error{"Admit": s.Admit, "Check": s.Check} {
			err := call(context.Background(), "acme-pack", Toolpack)
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, reason.ErrRateLimited) || !strings.Contains(err.Error(), s.path) {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if fi, err := os.Stat(s.path); err != nil || !fi.IsDir() {
			t.Fatal("the directory in the state file's place was touched")
		}
	})
	t.Run("state directory is a file", func(t *testing.T) {
		s, _ := newStore(t)
		writeFile(t, filepath.Dir(s.path), []byte("x"))
		err := s.Admit(context.Background(), "acme-pack", Toolpack)
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, reason.ErrRateLimited) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("state file is a dangling symlink", func(t *testing.T) {
		s, _ := newStore(t)
		if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/nonexistent/elsewhere", s.path); err != nil {
			t.Fatal(err)
		}
		err := s.Admit(context.Background(), "acme-pack", Toolpack)
		if err == nil || !errors.Is(err, reason.ErrRateLimited) {
			t.Fatalf("err = %v", err)
		}
		if _, err := os.Lstat(s.path); err != nil {
			t.Fatal("the symlink was replaced")
		}
	})
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
