package bounded

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadFile(small, 5); err != nil || string(data) != "12345" {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
	if _, err := ReadFile(small, 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the limit: err = %v, want ErrTooLarge", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing"), 5); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: err = %v", err)
	}

	// A FIFO nobody writes to: the open must not block, and it is refused.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(small, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want string
		read       func(string, int64) ([]byte, error)
	}{
		{fifo, "a named pipe (FIFO)", ReadFile},
		{fifo, "a named pipe (FIFO)", ReadFileFollow},
		{"/dev/zero", "a character device", ReadFileFollow},
		{dir, "a directory", ReadFile},
		{link, "a symlink", ReadFile},
	} {
		_, err := tc.read(tc.path, 1<<20)
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrNotRegular (%s)", tc.path, err, tc.want)
		}
	}
	if data, err := ReadFileFollow(link, 5); err != nil || string(data) != "12345" {
		t.Errorf("ReadFileFollow(symlink) = %q, %v", data, err)
	}
}

func TestJSONDepth(t *testing.T) {
	for _, tc := range []struct {
		doc string
		ok  bool
	}{
		{`{"a":[1,{"b":2}]}`, true},
		{`[[[1]]]`, true},
		{`[[[[1]]]]`, false},
		{`{"a":"[[[[[[[[","b":"\"[[[["}`, true},
		{`]]]]]][[[`, true},
		{`[[[[`, false},
	} {
		err := JSONDepth([]byte(tc.doc), 3)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", tc.doc, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrTooDeep) {
			t.Errorf("%s: err = %v, want ErrTooDeep", tc.doc, err)
		}
	}
}

// FuzzJSONDepth checks JSONDepth against encoding/json: for a document the
// decoder accepts, the depth it reaches is never more than JSONDepth's.
func FuzzJSONDepth(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"]]"}]}`, `"\\"[["`, `[[],[[]]]`, `]][[`, `{"\u005b":[[]]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := json.NewDecoder(bytes.NewReader(data))
		depth, deepest := 0, 0
		for {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			switch tok {
			case json.Delim('{'), json.Delim('['):
				depth++
				deepest = max(deepest, depth)
			case json.Delim('}'), json.Delim(']'):
				depth--
			}
		}
		if deepest > 0 && JSONDepth(data, deepest-1) == nil {
			t.Fatalf("the decoder reached depth %d; JSONDepth(%d) passed", deepest, deepest-1)
		}
	})
}
