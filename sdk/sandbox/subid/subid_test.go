package subid

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// files makes private copies of the four files with the given contents.
func files(t *testing.T, subuid, subgid, passwd, group string) Files {
	t.Helper()
	dir := t.TempDir()
	f := Files{UID: filepath.Join(dir, "subuid"), GID: filepath.Join(dir, "subgid"),
		Passwd: filepath.Join(dir, "passwd"), Group: filepath.Join(dir, "group")}
	for p, c := range map[string]string{f.UID: subuid, f.GID: subgid, f.Passwd: passwd, f.Group: group} {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const passwd = "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n"

func TestReserveEmpty(t *testing.T) {
	f := files(t, "", "", passwd, "root:x:0:\n")
	r, added, err := Reserve(f)
	if err != nil || !added || r != (Range{Start: 100000, Count: BlockSize}) {
		t.Fatalf("Reserve = %v, %v, %v", r, added, err)
	}
	for _, p := range []string{f.UID, f.GID} {
		if got := read(t, p); got != "agentnode:100000:65536\n" {
			t.Errorf("%s = %q", p, got)
		}
		if got, err := Lookup(p); err != nil || got != r {
			t.Errorf("Lookup(%s) = %v, %v", p, got, err)
		}
	}
	// Again: nothing changes.
	r2, added, err := Reserve(f)
	if err != nil || added || r2 != r {
		t.Fatalf("second Reserve = %v, %v, %v", r2, added, err)
	}
	if got := read(t, f.UID); got != "agentnode:100000:65536\n" {
		t.Errorf("after the second Reserve: %q", got)
	}
}

// Other lines are kept byte for byte (a last line without its newline
// too), and the block chosen overlaps none of them, no account and no
// group.
func TestReserveKeepsClear(t *testing.T) {
	subuid := "# comment\nalice:100000:65536\nbob:165536:65536" // no final newline
	subgid := "alice:100000:65536\n"
	pw := passwd + "svc:x:231073:231073::/:/bin/false\n" // inside 231072..
	group := "root:x:0:\nbig:x:300000:\n"                // inside 296608..
	f := files(t, subuid, subgid, pw, group)
	if err := os.Chmod(f.UID, 0o640); err != nil {
		t.Fatal(err)
	}
	r, added, err := Reserve(f)
	if err != nil || !added {
		t.Fatalf("Reserve = %v, %v, %v", r, added, err)
	}
	if want := (Range{Start: 100000 + 4*BlockSize, Count: BlockSize}); r != want {
		t.Errorf("range %v, want %v", r, want)
	}
	line := "agentnode:362144:65536\n"
	if got := read(t, f.UID); got != subuid+"\n"+line {
		t.Errorf("subuid = %q", got)
	}
	if got := read(t, f.GID); got != subgid+line {
		t.Errorf("subgid = %q", got)
	}
	if fi, err := os.Stat(f.UID); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("subuid mode %v, %v; want 0640 kept", fi.Mode(), err)
	}
}

// A reservation in one file is completed in the other; two that disagree
// are refused and left alone.
func TestReservePartial(t *testing.T) {
	f := files(t, "agentnode:200000:65536\n", "", passwd, "")
	r, added, err := Reserve(f)
	if err != nil || !added || r.Start != 200000 {
		t.Fatalf("Reserve = %v, %v, %v", r, added, err)
	}
	if got := read(t, f.GID); got != "agentnode:200000:65536\n" {
		t.Errorf("subgid = %q", got)
	}

	f = files(t, "agentnode:200000:65536\n", "agentnode:300000:65536\n", passwd, "")
	if _, _, err := Reserve(f); err == nil || !strings.Contains(err.Error(), "make them the same") {
		t.Fatalf("disagreeing files: %v", err)
	}
	// A reservation someone else's line now overlaps is refused.
	f = files(t, "agentnode:200000:65536\ncarol:210000:10\n", "", passwd, "")
	if _, _, err := Reserve(f); err == nil || !strings.Contains(err.Error(), "overlaps") {
		t.Fatalf("overlapped reservation: %v", err)
	}
	if got := read(t, f.GID); got != "" {
		t.Errorf("subgid written on a refusal: %q", got)
	}
}

func TestLookup(t *testing.T) {
	dir := t.TempDir()
	if _, err := Lookup(filepath.Join(dir, "missing")); !errors.Is(err, ErrNoReservation) {
		t.Errorf("missing file: %v", err)
	}
	p := filepath.Join(dir, "subuid")
	for content, ok := range map[string]bool{
		"":                          false,
		"alice:100000:65536\n":      false,
		"agentnode:100000:1\n":      false, // too small for a slot
		"agentnode:0:65536\n":       false, // the host's root
		"agentnode:100000:65536\n":  true,
		"x\nagentnode:100000:2\n":   true,
		"agentnode:4294967290:10\n": false, // past the last id
	} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Lookup(p)
		if (err == nil) != ok || (err != nil && !errors.Is(err, ErrNoReservation)) {
			t.Errorf("Lookup(%q) = %v, want ok %v", content, err, ok)
		}
	}
}

// Concurrent Reserves (two `agentnode setup` at once) write one line.
func TestReserveConcurrent(t *testing.T) {
	f := files(t, "", "", passwd, "")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, _, err := Reserve(f); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := read(t, f.UID); got != "agentnode:100000:65536\n" {
		t.Errorf("subuid = %q", got)
	}
}
