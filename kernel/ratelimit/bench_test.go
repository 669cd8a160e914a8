package ratelimit

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkAdmit is one admitted call (open, lock, check, record, fsync,
// close) next to the raw operations it wraps.
//
//	go test -run '^$' -bench . -benchmem ./kernel/ratelimit/
func BenchmarkAdmit(b *testing.B) {
	// full-hour: the clock advances 4s per call, so the package's window
	// holds ~900 timestamps of the last hour (the worst realistic case
	// for the defaults); fresh: an empty window.
	for _, c := range []struct {
		name string
		step time.Duration
		lim  Limit
	}{
		{"fresh", 2 * time.Hour, Toolpack},
		{"full-hour", 4 * time.Second, Limit{Burst: 10, PerMinute: 60, PerHour: 1000}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, clk := newStore(b)
			ctx := context.Background()
			for range 1000 { // warm the window up
				clk.Add(c.step)
				if err := s.Admit(ctx, "acme-pack", c.lim); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				clk.Add(c.step)
				if err := s.Admit(ctx, "acme-pack", c.lim); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("denied", func(b *testing.B) {
		s, _ := newStore(b)
		ctx := context.Background()
		lim := Limit{Burst: 1, PerMinute: 1, PerHour: 1}
		if err := s.Admit(ctx, "acme-pack", lim); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := s.Admit(ctx, "acme-pack", lim); err == nil {
				b.Fatal("admitted")
			}
		}
	})
	b.Run("check", func(b *testing.B) {
		s, _ := newStore(b)
		ctx := context.Background()
		if err := s.Admit(ctx, "acme-pack", Toolpack); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := s.Check(ctx, "acme-pack", Toolpack); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRawBolt is the floor under Admit: bbolt open + one Put of a
// window-sized value + commit (fsync) + close, with no checks.
func BenchmarkRawBolt(b *testing.B) {
	for _, n := range []int{1, 900} {
		b.Run(map[int]string{1: "fresh", 900: "full-hour"}[n], func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "raw.db")
			v := make([]byte, 8*n+4)
			for b.Loop() {
				db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
				if err != nil {
					b.Fatal(err)
				}
				err = db.Update(func(tx *bolt.Tx) error {
					bk, err := tx.CreateBucketIfNotExists([]byte("w"))
					if err != nil {
						return err
					}
					return bk.Put([]byte("acme-pack"), v)
				})
				if err != nil {
					b.Fatal(err)
				}
				db.Close()
			}
		})
	}
}

// BenchmarkRawFlock is the alternative design's floor: flock a file, read
// it, rewrite it in place, fsync, unlock.
func BenchmarkRawFlock(b *testing.B) {
	path := filepath.Join(b.TempDir(), "raw.state")
	buf := make([]byte, 8*900+4)
	for b.Loop() {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			b.Fatal(err)
		}
		if _, err := f.ReadAt(buf, 0); err != nil && len(buf) == 0 {
			b.Fatal(err)
		}
		binary.BigEndian.PutUint64(buf, uint64(time.Now().UnixNano()))
		if _, err := f.WriteAt(buf, 0); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
