package pkginstall

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/pkglist"
	"github.com/agentnode/agentnode/kernel/manifest"
	"github.com/agentnode/agentnode/kernel/store"
)

// ent is one tar entry to write: the header as given (Size is filled in
// from body for regular files) and the file content.
type ent struct {
	hdr  tar.Header
	body string
}

func file(name, body string, mode int64) ent {
	return ent{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode}, body: body}
}

func dir(name string) ent {
	return ent{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755}}
}

func symlink(name, target string) ent {
	return ent{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}}
}

// goodEntries is a valid package, like makePkg's, as tar entries.
func goodEntries(id, version string) []ent {
	return []ent{
		dir("./"),
		file("./agentnode.yaml", manifestYAML(id, version), 0o644),
		dir("./bin/"),
		file("./bin/echo", "#!/bin/sh\ncat\n", 0o755),
		dir("./data/"),
		dir("./data/empty/"),
		file("./data/words.txt", "hello "+version+"\n", 0o640),
		symlink("./data/echo-link", "../bin/echo"),
	}
}

// tarBytes writes the entries as an uncompressed tar stream.
func tarBytes(t *testing.T, entries []ent) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := e.hdr
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.body))
		}
		if h.Format == tar.FormatUnknown {
			h.Format = tar.FormatPAX
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("write header %s: %v", h.Name, err)
		}
		if e.body != "" {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gz(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func tgz(t *testing.T, entries []ent) []byte { return gz(t, tarBytes(t, entries)) }

// writeFile writes data to a new file in its own temp dir and returns it.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// archiveStore is a store at <base>/packages; base is where the canaries
// of escaping entries would land.
func archiveStore(t *testing.T) (*Installer, string) {
	t.Helper()
	base := t.TempDir()
	s := Open(filepath.Join(base, "packages"))
	t.Cleanup(func() { _ = removeTree(s.Root()) })
	return s, base
}

// assertNothingInstalled checks that the store holds no package and no
// leftover (only its lock file, or nothing at all), and that base holds
// nothing but the store.
func assertNothingInstalled(t *testing.T, s *Installer, base string) {
	t.Helper()
	ents, err := os.ReadDir(s.Root())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != lockFile {
			t.Errorf("store holds %s after a refused install", e.Name())
		}
	}
	top, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range top {
		if e.Name() != "packages" {
			t.Errorf("%s was written next to the store", filepath.Join(base, e.Name()))
		}
	}
	if pkgs, err := pkglist.List(s.Store); err != nil || len(pkgs) != 0 {
		t.Errorf("List = %v, %v; want nothing", pkgs, err)
	}
}

// wantRefused checks err is an *ArchiveError of the given kind whose text
// contains msg and names the archive (and the entry, if entry != "").
func wantRefused(t *testing.T, err error, archive string, kind error, entry, msg string) {
	t.Helper()
	if err == nil {
		t.Fatal("install succeeded; want a refusal")
	}
	var ae *ArchiveError
	if !errors.As(err, &ae) || !errors.Is(err, ErrBadArchive) || !errors.Is(err, kind) {
		t.Fatalf("error %T %q; want an *ArchiveError wrapping %v", err, err, kind)
	}
	if !strings.Contains(err.Error(), "archive "+archive) {
		t.Errorf("error does not name the archive %s: %v", archive, err)
	}
	if entry != "" && ae.Entry != entry {
		t.Errorf("entry %q; want %q (%v)", ae.Entry, entry, err)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("error %q does not contain %q", err, msg)
	}
}

func TestArchiveInstallsLikeDirectory(t *testing.T) {
	src := makePkg(t, "echo-pack", "1.0.0")
	want := mustHash(t, src)

	layouts := map[string][]ent{
		"top level":      goodEntries("echo-pack", "1.0.0"),
		"one directory":  nil,
		"no ./ and dirs": nil,
	}
	var wrapped, bare []ent
	for _, e := range goodEntries("echo-pack", "1.0.0") {
		w := e
		w.hdr.Name = "echo-pack-1.0.0/" + strings.TrimPrefix(e.hdr.Name, "./")
		wrapped = append(wrapped, w)
		if e.hdr.Typeflag != tar.TypeDir || e.hdr.Name == "./data/empty/" {
			b := e
			b.hdr.Name = strings.TrimPrefix(e.hdr.Name, "./")
			bare = append(bare, b)
		}
	}
	layouts["one directory"] = wrapped
	layouts["no ./ and dirs"] = bare
	for name, entries := range layouts {
		t.Run(name, func(t *testing.T) {
			s, _ := archiveStore(t)
			archive := writeFile(t, "pkg.tar.gz", tgz(t, entries))
			p, err := s.Install(archive, nil)
			if err != nil {
				t.Fatal(err)
			}
			if p.ArtifactHash != want {
				t.Fatalf("archive install hash %s; the directory hashes %s", p.ArtifactHash, want)
			}
			if err := s.Verify(p); err != nil {
				t.Fatal(err)
			}
			if p.Source != store.SourceArchive || p.ArchiveSHA256 == "" {
				t.Fatalf("source %q sha %q", p.Source, p.ArchiveSHA256)
			}
			d, err := Open(filepath.Join(t.TempDir(), "packages")).Install(src, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d.ArtifactHash != p.ArtifactHash || d.Source != store.SourceDirectory {
				t.Fatalf("directory install %s (%s) != archive install %s", d.ArtifactHash, d.Source, p.ArtifactHash)
			}
		})
	}
}

// An archive made by GNU tar, the way a publisher makes one, installs with
// the same hash as the directory.
func TestGNUTarArchive(t *testing.T) {
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("no tar")
	}
	src := makePkg(t, "echo-pack", "1.0.0")
	archive := filepath.Join(t.TempDir(), "pkg.tgz")
	if out, err := exec.Command("tar", "czf", archive, "-C", src, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	s, _ := archiveStore(t)
	p, err := s.Install(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.ArtifactHash != mustHash(t, src) {
		t.Fatalf("hash %s != %s", p.ArtifactHash, mustHash(t, src))
	}
}

// The archive is recognised by content: a .tar.gz named .zip installs, a
// text file named .tar.gz is refused.
func TestArchiveDetectedByMagic(t *testing.T) {
	s, base := archiveStore(t)
	notGz := writeFile(t, "pkg.tar.gz", []byte("manifest_version: 0.2\n"))
	_, err := s.Install(notGz, nil)
	wantRefused(t, err, notGz, ErrCorrupt, "", "no gzip header")
	plainTar := writeFile(t, "pkg.tar.gz", tarBytes(t, goodEntries("echo-pack", "1.0.0")))
	_, err = s.Install(plainTar, nil)
	wantRefused(t, err, plainTar, ErrCorrupt, "", "no gzip header")
	assertNothingInstalled(t, s, base)

	fifo := filepath.Join(t.TempDir(), "pkg.tar.gz")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Install(fifo, nil); !errors.Is(err, ErrBadArchive) || !strings.Contains(err.Error(), "neither a directory nor a regular file") {
		t.Fatalf("fifo as the archive: %v", err)
	}
	assertNothingInstalled(t, s, base)

	odd := writeFile(t, "pkg.zip", tgz(t, goodEntries("echo-pack", "1.0.0")))
	if _, err := s.Install(odd, nil); err != nil {
		t.Fatal(err)
	}
}

// One test per archive attack: each archive is a valid package plus the
// attack, built with archive/tar. Each must be refused with its own error,
// install nothing, leave no staging directory and write nothing outside
// (the canaries the attacks aim at do not exist afterwards).
func TestArchiveAttacks(t *testing.T) {
	type attack struct {
		name    string
		entries func(base string) []ent // appended to a good package
		kind    error
		entry   func(base string) string // the entry the error names
		msg     string
	}
	same := func(s string) func(string) string { return func(string) string { return s } }
	attacks := []attack{
		{"dotdot to the store's parent", func(string) []ent { return []ent{file("../../../canary", "pwned", 0o644)} },
			ErrUnsafePath, same("../../../canary"), "has a .. element"},
		{"dotdot inside a name", func(string) []ent { return []ent{file("bin/../../canary", "pwned", 0o644)} },
			ErrUnsafePath, same("bin/../../canary"), "has a .. element"},
		{"dotdot that cleans inside", func(string) []ent { return []ent{file("bin/../data/x", "x", 0o644)} },
			ErrUnsafePath, same("bin/../data/x"), "has a .. element"},
		{"absolute name", func(base string) []ent { return []ent{file(base+"/canary", "pwned", 0o644)} },
			ErrUnsafePath, func(base string) string { return base + "/canary" }, "absolute name"},
		{"backslash name", func(string) []ent { return []ent{file(`..\..\canary`, "pwned", 0o644)} },
			ErrUnsafePath, same(`..\..\canary`), `contains \`},
		{"absolute symlink", func(base string) []ent { return []ent{symlink("out", base)} },
			ErrLinkEscape, same("out"), "absolute target"},
		{"escaping relative symlink", func(string) []ent { return []ent{symlink("data/out", "../../../..")} },
			ErrLinkEscape, same("data/out"), "leads out of the package"},
		{"symlink then file through it (tar slip)", func(base string) []ent {
			return []ent{symlink("out", base), file("out/canary", "pwned", 0o644)}
		}, ErrLinkEscape, same("out"), "absolute target"},
		{"inside symlink then file through it", func(string) []ent {
			return []ent{symlink("alias", "bin"), file("alias/canary", "x", 0o755)}
		}, ErrUnsafePath, same("alias/canary"), "goes through the symlink alias"},
		{"symlink then directory through it", func(string) []ent {
			return []ent{symlink("alias", "data"), dir("alias/sub/")}
		}, ErrUnsafePath, same("alias/sub/"), "goes through the symlink alias"},
		{"symlink over the manifest", func(string) []ent {
			return []ent{symlink("agentnode.yaml", "bin/echo")}
		}, ErrDuplicate, same("agentnode.yaml"), "appears twice"},
		{"duplicate file", func(string) []ent { return []ent{file("./bin/echo", "#!/bin/sh\nrm -rf /\n", 0o755)} },
			ErrDuplicate, same("./bin/echo"), "bin/echo appears twice"},
		{"hard link out", func(string) []ent {
			return []ent{{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "passwd", Linkname: "/etc/passwd"}}}
		}, ErrHardLink, same("passwd"), "hard link"},
		{"hard link inside", func(string) []ent {
			return []ent{{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "copy", Linkname: "bin/echo"}}}
		}, ErrHardLink, same("copy"), "hard link"},
		{"char device", func(string) []ent {
			return []ent{{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3, Mode: 0o666}}}
		}, ErrSpecialFile, same("null"), "device"},
		{"block device", func(string) []ent {
			return []ent{{hdr: tar.Header{Typeflag: tar.TypeBlock, Name: "sda", Devmajor: 8, Mode: 0o660}}}
		}, ErrSpecialFile, same("sda"), "device"},
		{"fifo", func(string) []ent {
			return []ent{{hdr: tar.Header{Typeflag: tar.TypeFifo, Name: "pipe", Mode: 0o644}}}
		}, ErrSpecialFile, same("pipe"), "named pipe"},
		{"top level not a directory", func(string) []ent { return []ent{symlink("./", "/")} },
			ErrUnsafePath, same("./"), "top level must be a directory"},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			s, base := archiveStore(t)
			archive := writeFile(t, "evil.tar.gz", tgz(t, append(goodEntries("echo-pack", "1.0.0"), a.entries(base)...)))
			_, err := s.Install(archive, nil)
			wantRefused(t, err, archive, a.kind, a.entry(base), a.msg)
			assertNothingInstalled(t, s, base)
			for _, canary := range []string{filepath.Join(base, "canary"), "/canary", filepath.Join(s.Root(), "canary")} {
				if _, err := os.Lstat(canary); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("canary %s exists after the attack", canary)
				}
			}
		})
	}
}

// A chain of symlinks that each look inside but together lead out
// (d/up -> .., then esc -> d/up/..) is refused by the physical check that
// follows unpacking, before anything is installed.
func TestArchiveSymlinkChainEscape(t *testing.T) {
	s, base := archiveStore(t)
	entries := append(goodEntries("echo-pack", "1.0.0"), dir("d/"), symlink("d/up", ".."), symlink("esc", "d/up/.."))
	archive := writeFile(t, "chain.tar.gz", tgz(t, entries))
	_, err := s.Install(archive, nil)
	wantRefused(t, err, archive, ErrLinkEscape, "", "esc")
	assertNothingInstalled(t, s, base)
}

// setuid, setgid and sticky bits are dropped: only the executable bit is
// kept, and everything installed is read-only.
func TestArchiveStripsSpecialBits(t *testing.T) {
	s, _ := archiveStore(t)
	entries := goodEntries("echo-pack", "1.0.0")
	for i := range entries {
		switch entries[i].hdr.Name {
		case "./bin/echo":
			entries[i].hdr.Mode = 0o6755 // setuid + setgid
		case "./bin/":
			entries[i].hdr.Mode = 0o1777 // sticky, world-writable
		case "./data/words.txt":
			entries[i].hdr.Mode = 0o4666
		}
	}
	archive := writeFile(t, "suid.tar.gz", tgz(t, entries))
	p, err := s.Install(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]fs.FileMode{"bin/echo": 0o555, "bin": fs.ModeDir | 0o555, "data/words.txt": 0o444} {
		fi, err := os.Lstat(filepath.Join(p.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() & (fs.ModeType | fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky); got != want {
			t.Errorf("%s installed with mode %v; want %v", name, got, want)
		}
	}
}

// Caps, exercised with small limits so the archives stay small; the caps
// count what is decompressed and written, not what headers claim.
func TestArchiveCaps(t *testing.T) {
	small := Limits{ArchiveBytes: 1 << 20, StreamBytes: 256 << 10, UnpackedBytes: 4096, FileBytes: 2048, Entries: 20}
	cases := []struct {
		name  string
		data  func(t *testing.T) []byte
		kind  error
		entry string
		msg   string
	}{
		{"too many entries", func(t *testing.T) []byte {
			var e []ent
			for i := range 20 {
				e = append(e, file("f"+strings.Repeat("x", i), "", 0o644))
			}
			return tgz(t, append(goodEntries("echo-pack", "1.0.0"), e...))
		}, ErrTooLarge, "fxxxxxxxxxxxx", "more than 20 entries"},
		{"file over the cap", func(t *testing.T) []byte {
			return tgz(t, append(goodEntries("echo-pack", "1.0.0"), file("big", strings.Repeat("a", 2049), 0o644)))
		}, ErrTooLarge, "big", "a file may have at most 2048"},
		{"total over the cap", func(t *testing.T) []byte {
			return tgz(t, append(goodEntries("echo-pack", "1.0.0"),
				file("a", strings.Repeat("a", 2000), 0o644), file("b", strings.Repeat("b", 2000), 0o644)))
		}, ErrTooLarge, "b", "exceed 4096 bytes in all"},
		{"gzip bomb of zeros after the archive", func(t *testing.T) []byte {
			return gz(t, append(tarBytes(t, goodEntries("echo-pack", "1.0.0")), make([]byte, 8<<20)...))
		}, ErrTooLarge, "", "decompresses to more than 262144 bytes"},
		{"archive file over the cap", func(t *testing.T) []byte {
			return append(tgz(t, goodEntries("echo-pack", "1.0.0")), make([]byte, 1<<20)...)
		}, ErrTooLarge, "", "larger than 1048576 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, base := archiveStore(t)
			s.limits = small
			archive := writeFile(t, "cap.tar.gz", c.data(t))
			_, err := s.Install(archive, nil)
			wantRefused(t, err, archive, c.kind, c.entry, c.msg)
			assertNothingInstalled(t, s, base)
		})
	}
}

// The documented caps themselves, with archives just over them.
func TestArchiveDefaultCaps(t *testing.T) {
	if testing.Short() {
		t.Skip("builds archives of tens of MiB")
	}
	t.Run("file", func(t *testing.T) {
		s, base := archiveStore(t)
		archive := writeFile(t, "big.tar.gz", tgz(t, append(goodEntries("echo-pack", "1.0.0"),
			file("big", string(make([]byte, MaxFileBytes+1)), 0o644))))
		_, err := s.Install(archive, nil)
		wantRefused(t, err, archive, ErrTooLarge, "big", "a file may have at most 33554432")
		assertNothingInstalled(t, s, base)
	})
	t.Run("entries", func(t *testing.T) {
		s, base := archiveStore(t)
		e := goodEntries("echo-pack", "1.0.0")
		for i := range MaxEntries {
			e = append(e, file("f/"+hex.EncodeToString([]byte{byte(i >> 8), byte(i)}), "", 0o644))
		}
		archive := writeFile(t, "many.tar.gz", tgz(t, e))
		_, err := s.Install(archive, nil)
		wantRefused(t, err, archive, ErrTooLarge, "", "more than 10000 entries")
		assertNothingInstalled(t, s, base)
	})
	t.Run("gzip bomb", func(t *testing.T) {
		s, base := archiveStore(t)
		data := gz(t, append(tarBytes(t, goodEntries("echo-pack", "1.0.0")), make([]byte, MaxStreamBytes+1)...))
		if len(data) > 1<<20 {
			t.Fatalf("the bomb is %d bytes compressed; expected well under 1 MiB", len(data))
		}
		archive := writeFile(t, "bomb.tar.gz", data)
		_, err := s.Install(archive, nil)
		wantRefused(t, err, archive, ErrTooLarge, "", "decompresses to more than")
		assertNothingInstalled(t, s, base)
	})
}

func TestArchiveCorruptOrTrailing(t *testing.T) {
	good := tgz(t, goodEntries("echo-pack", "1.0.0"))
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0xff
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-8] ^= 0x01 // the gzip trailer's CRC-32
	cases := []struct {
		name string
		data []byte
		kind error
		msg  string
	}{
		{"truncated", good[:len(good)/2], ErrCorrupt, ""},
		{"truncated trailer", good[:len(good)-4], ErrCorrupt, ""},
		{"flipped byte", flipped, ErrCorrupt, ""},
		{"bad checksum", badCRC, ErrCorrupt, "checksum"},
		{"garbage after gzip", append(bytes.Clone(good), "garbage"...), ErrTrailingData, "7 bytes after the gzip stream"},
		{"second gzip member", append(bytes.Clone(good), gz(t, []byte("more"))...), ErrTrailingData, "after the gzip stream"},
		{"data after the tar end", gz(t, append(tarBytes(t, goodEntries("echo-pack", "1.0.0")), "hidden"...)), ErrTrailingData, "after the end of the tar archive"},
		{"empty gzip", gz(t, nil), ErrBadArchive, "no agentnode.yaml"},
		{"not tar inside", gz(t, []byte(strings.Repeat("not a tar header ", 100))), ErrCorrupt, "tar"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, base := archiveStore(t)
			archive := writeFile(t, "bad.tar.gz", c.data)
			_, err := s.Install(archive, nil)
			wantRefused(t, err, archive, c.kind, "", c.msg)
			assertNothingInstalled(t, s, base)
		})
	}
}

func TestArchiveManifestErrors(t *testing.T) {
	s, base := archiveStore(t)
	entries := goodEntries("echo-pack", "1.0.0")
	entries[1] = file("./agentnode.yaml", strings.Replace(manifestYAML("echo-pack", "1.0.0"), "summary:", "sumary:", 1), 0o644)
	archive := writeFile(t, "pkg.tar.gz", tgz(t, entries))
	_, err := s.Install(archive, nil)
	var me *manifest.Error
	if !errors.As(err, &me) {
		t.Fatalf("error %T %v; want *manifest.Error", err, err)
	}
	if want := archive + ":agentnode.yaml: sumary: unknown field"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
	// no manifest at all, and a manifest two levels down
	for name, entries := range map[string][]ent{
		"none":   {file("README", "hi", 0o644)},
		"nested": {file("a/b/agentnode.yaml", manifestYAML("echo-pack", "1.0.0"), 0o644)},
	} {
		archive := writeFile(t, name+".tar.gz", tgz(t, entries))
		_, err := s.Install(archive, nil)
		wantRefused(t, err, archive, ErrBadArchive, "", "no agentnode.yaml at the top of the archive")
	}
	assertNothingInstalled(t, s, base)
}

func TestSHA256Pin(t *testing.T) {
	data := tgz(t, goodEntries("echo-pack", "1.0.0"))
	sum := sha256.Sum256(data)
	right := hex.EncodeToString(sum[:])
	wrong := strings.Repeat("0", 64)

	t.Run("archive mismatch is refused before unpacking", func(t *testing.T) {
		s, base := archiveStore(t)
		archive := writeFile(t, "pkg.tar.gz", data)
		// Fail the test if anything gets as far as a staging directory.
		s.afterFill = func(string) error { t.Error("unpacked despite a wrong pin"); return nil }
		_, err := s.InstallFrom(archive, InstallOptions{SHA256: wrong})
		if !errors.Is(err, ErrPinMismatch) || !strings.Contains(err.Error(), right) {
			t.Fatalf("wrong pin: %v", err)
		}
		if _, err := os.Lstat(s.Root()); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the store was created before the pin was checked: %v", err)
		}
		assertNothingInstalled(t, s, base)
	})
	t.Run("archive match", func(t *testing.T) {
		s, _ := archiveStore(t)
		archive := writeFile(t, "pkg.tar.gz", data)
		for _, pin := range []string{right, "sha256:" + strings.ToUpper(right)} {
			p, err := s.InstallFrom(archive, InstallOptions{SHA256: pin})
			if err != nil {
				t.Fatal(err)
			}
			if p.ArchiveSHA256 != right {
				t.Fatalf("recorded archive sha %s", p.ArchiveSHA256)
			}
		}
	})
	t.Run("malformed pin", func(t *testing.T) {
		s, base := archiveStore(t)
		archive := writeFile(t, "pkg.tar.gz", data)
		for _, pin := range []string{"abc", right + "0", strings.Repeat("g", 64), "md5:" + right} {
			if _, err := s.InstallFrom(archive, InstallOptions{SHA256: pin}); !errors.Is(err, ErrBadPin) {
				t.Errorf("pin %q: %v", pin, err)
			}
		}
		assertNothingInstalled(t, s, base)
	})
	t.Run("directory pins its content hash", func(t *testing.T) {
		src := makePkg(t, "echo-pack", "1.0.0")
		s, base := archiveStore(t)
		if _, err := s.InstallFrom(src, InstallOptions{SHA256: wrong}); !errors.Is(err, ErrPinMismatch) {
			t.Fatalf("wrong pin: %v", err)
		}
		assertNothingInstalled(t, s, base)
		h := strings.TrimPrefix(mustHash(t, src), "sha256:")
		if _, err := s.InstallFrom(src, InstallOptions{SHA256: h}); err != nil {
			t.Fatal(err)
		}
	})
}

// An install that fails after the archive was unpacked (a full disk, a
// crash) leaves the previous install in place and no staging directory;
// a staging directory left by a killed process is removed by the next
// install or remove.
func TestArchiveInterruptedInstall(t *testing.T) {
	s, base := archiveStore(t)
	v1 := writeFile(t, "v1.tar.gz", tgz(t, goodEntries("echo-pack", "1.0.0")))
	old, err := s.Install(v1, nil)
	if err != nil {
		t.Fatal(err)
	}
	v2 := writeFile(t, "v2.tar.gz", tgz(t, goodEntries("echo-pack", "2.0.0")))
	var seen string
	s.afterFill = func(staging string) error {
		seen = staging
		if _, err := os.Stat(filepath.Join(staging, store.ContentDir, manifest.FileName)); err != nil {
			t.Errorf("hook ran before the archive was unpacked: %v", err)
		}
		return errors.New("injected: no space left on device")
	}
	if _, err := s.Install(v2, nil); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("install = %v", err)
	}
	if _, err := os.Lstat(seen); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("staging dir %s left behind: %v", seen, err)
	}
	p, err := s.Get("echo-pack")
	if err != nil || p.Version != "1.0.0" || p.ArtifactHash != old.ArtifactHash {
		t.Fatalf("after the failed upgrade: %+v, %v", p, err)
	}
	if err := s.Verify(p); err != nil {
		t.Fatal(err)
	}

	// A "crash" mid-unpack: a staging dir with a half-written, read-only
	// tree. Nothing lists it; the next install removes it.
	s.afterFill = nil
	crash := filepath.Join(s.Root(), stagingPrefix+"crash")
	mustMkdir(t, filepath.Join(crash, unpackedDir, "bin"))
	mustWrite(t, filepath.Join(crash, unpackedDir, "agentnode.yaml"), manifestYAML("echo-pack", "9.9.9")[:40], 0o444)
	if err := os.Chmod(filepath.Join(crash, unpackedDir), 0o555); err != nil {
		t.Fatal(err)
	}
	if pkgs, err := pkglist.List(s.Store); err != nil || len(pkgs) != 1 || pkgs[0].Version != "1.0.0" {
		t.Fatalf("List with a leftover staging dir: %v, %v", pkgs, err)
	}
	if _, err := s.Install(v2, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(crash); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("leftover staging dir survived the next install: %v", err)
	}
	if err := s.Remove("echo-pack"); err != nil {
		t.Fatal(err)
	}
	assertNothingInstalled(t, s, base)
}

// Directories are held to the same caps.
func TestDirectoryCaps(t *testing.T) {
	src := makePkg(t, "echo-pack", "1.0.0")
	mustWrite(t, filepath.Join(src, "data", "big"), strings.Repeat("x", 3000), 0o644)
	for name, lim := range map[string]Limits{
		"file":    {ArchiveBytes: 1 << 20, StreamBytes: 1 << 20, UnpackedBytes: 1 << 20, FileBytes: 2048, Entries: 100},
		"total":   {ArchiveBytes: 1 << 20, StreamBytes: 1 << 20, UnpackedBytes: 3000, FileBytes: 4096, Entries: 100},
		"entries": {ArchiveBytes: 1 << 20, StreamBytes: 1 << 20, UnpackedBytes: 1 << 20, FileBytes: 4096, Entries: 5},
	} {
		t.Run(name, func(t *testing.T) {
			s, base := archiveStore(t)
			s.limits = lim
			if _, err := s.Install(src, nil); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("install = %v; want ErrTooLarge", err)
			}
			assertNothingInstalled(t, s, base)
		})
	}
}
