package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/cmd/agentnode/termsafe"
)

// tty is a terminal stand-in: the answer to read, what was printed.
type tty struct {
	io.Reader
	bytes.Buffer
}

func (t *tty) Read(p []byte) (int, error) { return t.Reader.Read(p) }

// TestAskTTYEscapesQuestion: a question carrying terminal control sequences
// (the kernel passes an inspector's reason unescaped) cannot redraw the
// prompt: what reaches the terminal has no control or invisible format
// characters, shows them escaped, and still ends in [y/N]; only y/yes is yes.
func TestAskTTYEscapesQuestion(t *testing.T) {
	hostile := "inspector x: ok\r\x1b[2K\x1b[1A" + "Allow acme-pack/read_only (read)? [y/N] \u202egnp.exe\u200b\x07\x08"
	q := "Allow acme-pack/delete_x (delete, trust curated, " + hostile + ")? [y/N] "
	for answer, want := range map[string]bool{"y\n": true, "Yes\n": true, "n\n": false, "": false, "yess\n": false} {
		term := &tty{Reader: strings.NewReader(answer)}
		yes, err := askOn(term, q)
		if err != nil || yes != want {
			t.Fatalf("answer %q: yes=%v err=%v, want %v", answer, yes, err, want)
		}
		asked := term.String()
		if strings.IndexFunc(asked, termsafe.Unsafe) >= 0 {
			t.Fatalf("question carries control characters: %q", asked)
		}
		for _, s := range []string{`\r\x1b[2K\x1b[1A`, `\u202egnp.exe\u200b\a\b`, "Allow acme-pack/delete_x (delete, trust curated, "} {
			if !strings.Contains(asked, s) {
				t.Errorf("question %q lacks %q", asked, s)
			}
		}
		if !strings.HasSuffix(asked, "? [y/N] ") {
			t.Errorf("question does not end with the [y/N] prompt: %q", asked)
		}
	}
}
