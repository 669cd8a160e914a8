package lockfile_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/lockedit"
	. "github.com/agentnode/agentnode/kernel/lockfile"
)

// vectorKey is the seal key of the test vector: bytes 0x00..0x1f.
func vectorKey() []byte {
	k := make([]byte, KeySize)
	for i := range k {
		k[i] = byte(i)
	}
	return k
}

func keyOf(k []byte) KeyFunc { return func() ([]byte, error) { return k, nil } }

// specBlock returns the fenced block after the "<!-- vector: NAME -->"
// marker in specs/lockfile.md, with its final newline.
func specBlock(t testing.TB, name string) []byte {
	t.Helper()
	spec, err := os.ReadFile(filepath.Join("..", "..", "specs", "lockfile.md"))
	if err != nil {
		t.Fatal(err)
	}
	marker := "<!-- vector: " + name + " -->\n"
	i := bytes.Index(spec, []byte(marker))
	if i < 0 {
		t.Fatalf("specs/lockfile.md has no %q", marker)
	}
	rest := spec[i+len(marker):]
	nl := bytes.IndexByte(rest, '\n')
	if nl < 0 || !bytes.HasPrefix(rest, []byte("```")) {
		t.Fatalf("no fenced block after %q", marker)
	}
	rest = rest[nl+1:]
	end := bytes.Index(rest, []byte("\n```"))
	if end < 0 {
		t.Fatalf("unterminated block after %q", marker)
	}
	return rest[:end+1]
}

// vectorDoc parses the lockfile of the spec's test vector.
func vectorDoc(t testing.TB) (*Document, []byte) {
	t.Helper()
	data := specBlock(t, "lockfile")
	d, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return d, data
}

const (
	vecHello     = "295da2dc51a25e114a6f1e95f571c7be665b5d5c44e0a8b7afd10dded7ab8c40"
	vecLegacy    = "d7ab5898b2582a7e9dbc748b10b4bb6759baca53030d93c0bc3a67eb2f1d3d3d"
	vecStructure = "2cb568480f36e69fabfbe0178e46228f8df79cee2632742780d491eeca8fa2f6"
	vecKeyID     = "217c169a16661754"
	vecSeal      = "ae0f07d30b8843a1b1d77a97beb763ef018d58ef0d5461ef046c81cfd723623f"
)

func TestVectorInSpec(t *testing.T) {
	d, data := vectorDoc(t)
	spec, _ := os.ReadFile(filepath.Join("..", "..", "specs", "lockfile.md"))
	for _, h := range []string{vecHello, vecLegacy, vecStructure, vecKeyID, vecSeal} {
		if !bytes.Contains(spec, []byte("| `"+h+"`")) {
			t.Errorf("the table in specs/lockfile.md does not list %s", h)
		}
	}
	if !strings.Contains(string(data), "\u2028") {
		t.Fatal("the vector lost its raw U+2028 (an editor changed it?)")
	}
	// Our on-disk form of the document is byte for byte the vector
	// (which Python's json.dump(indent=2, ensure_ascii=False) wrote).
	if got := lockedit.Marshal(d); !bytes.Equal(got, data) {
		t.Fatalf("Marshal differs from the vector:\n%s", got)
	}
	if h, _ := EntryHash(d.Entry("hello-tools"), 3); h != vecHello {
		t.Errorf("hello-tools hash %s, want %s", h, vecHello)
	}
	if h, _ := EntryHash(d.Entry("legacy-pack"), 1); h != vecLegacy {
		t.Errorf("legacy-pack hash %s, want %s", h, vecLegacy)
	}
	if got := lockedit.SelectCanonicalVersion(d.Entry("hello-tools")); got != 3 {
		t.Errorf("hello-tools canonical version %d, want 3", got)
	}
	if got := lockedit.SelectCanonicalVersion(d.Entry("legacy-pack")); got != 1 {
		t.Errorf("legacy-pack canonical version %d, want 1", got)
	}
	canon := specBlock(t, "hello-tools-canonical")
	if got := Canonical(CanonicalEntry(d.Entry("hello-tools"), 3)); string(got)+"\n" != string(canon) {
		t.Errorf("canonical entry\n got %s\nwant %s", got, canon)
	}
	if h := StructureHash(d); h != vecStructure {
		t.Errorf("structure %s, want %s", h, vecStructure)
	}
	if id := KeyID(vectorKey()); id != vecKeyID {
		t.Errorf("key id %s, want %s", id, vecKeyID)
	}
	if h := SealHash(d, vectorKey()); h != vecSeal {
		t.Errorf("seal %s, want %s", h, vecSeal)
	}
	r := d.Verify(keyOf(vectorKey()))
	assertAllVerified(t, r)

	// Sealing the document again reproduces the stored seal exactly.
	d.Root.Delete(FieldSeal)
	lockedit.Seal(d, vectorKey())
	if got := lockedit.Marshal(d); !bytes.Equal(got, data) {
		t.Fatalf("re-sealed document differs from the vector:\n%s", got)
	}
}

func assertAllVerified(t *testing.T, r *Report) {
	t.Helper()
	for _, e := range r.Entries {
		if e.Status != Verified {
			t.Errorf("entry %s: %s (%s)", e.Slug, e.Status, e.Detail)
		}
	}
	if r.Structure.Status != Verified {
		t.Errorf("structure: %s (%s)", r.Structure.Status, r.Structure.Detail)
	}
	if r.Seal.Status != Verified {
		t.Errorf("seal: %s (%s)", r.Seal.Status, r.Seal.Detail)
	}
	if p, w := lockedit.Problems(r, true); len(p)+len(w) > 0 {
		t.Errorf("problems %q, warnings %q", p, w)
	}
}

func TestCanonicalVectorsInSpec(t *testing.T) {
	lines := strings.Split(strings.TrimSuffix(string(specBlock(t, "canonical")), "\n"), "\n")
	if len(lines) < 2 || len(lines)%2 != 0 {
		t.Fatalf("canonical vector block: want pairs of lines, got %d lines", len(lines))
	}
	for i := 0; i < len(lines); i += 2 {
		v, err := ParseValue([]byte(lines[i]))
		if err != nil {
			t.Fatalf("%s: %v", lines[i], err)
		}
		if got := string(Canonical(v)); got != lines[i+1] {
			t.Errorf("canonical of %s\n got %s\nwant %s", lines[i], got, lines[i+1])
		}
	}
}
