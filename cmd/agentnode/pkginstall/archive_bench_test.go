package pkginstall

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// benchArchive is a package of 200 files of 4 KiB in 10 directories.
func benchArchive(b *testing.B) []byte {
	t := &testing.T{}
	entries := goodEntries("echo-pack", "1.0.0")
	for i := range 200 {
		entries = append(entries, file(fmt.Sprintf("lib/d%d/f%d.txt", i%10, i), string(bytes.Repeat([]byte{byte('a' + i%26)}, 4096)), 0o644))
	}
	data := tgz(t, entries)
	if t.Failed() {
		b.Fatal("building the archive failed")
	}
	return data
}

// BenchmarkInstallArchive is a full archive install: checks, unpack, manifest,
// read-only, content hash, meta.json, fsyncs, swap.
func BenchmarkInstallArchive(b *testing.B) {
	archive := filepath.Join(b.TempDir(), "pkg.tar.gz")
	if err := os.WriteFile(archive, benchArchive(b), 0o644); err != nil {
		b.Fatal(err)
	}
	s := Open(filepath.Join(b.TempDir(), "packages"))
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Install(archive, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnpackChecked is unpack alone (every entry checked, files fsynced).
func BenchmarkUnpackChecked(b *testing.B) {
	data := benchArchive(b)
	base := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		if err := unpack(data, "pkg.tar.gz", filepath.Join(base, fmt.Sprint(i)), DefaultLimits); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnpackRaw is the raw thing unpack wraps: gzip + tar into a
// directory with no checks and no fsync.
func BenchmarkUnpackRaw(b *testing.B) {
	data := benchArchive(b)
	base := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		dst := filepath.Join(base, fmt.Sprint(i))
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			p := filepath.Join(dst, h.Name)
			switch h.Typeflag {
			case tar.TypeDir:
				err = os.MkdirAll(p, 0o755)
			case tar.TypeReg:
				_ = os.MkdirAll(filepath.Dir(p), 0o755)
				var f *os.File
				if f, err = os.Create(p); err == nil {
					_, err = io.Copy(f, tr)
					f.Close()
				}
			case tar.TypeSymlink:
				err = os.Symlink(h.Linkname, p)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}
