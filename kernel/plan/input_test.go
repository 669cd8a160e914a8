package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentnode/agentnode/kernel/reason"
)

func TestCheckInputBounds(t *testing.T) {
	deep := func(n int) []byte {
		return []byte(`{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`)
	}
	for _, tc := range []struct {
		name  string
		input []byte
		want  error
	}{
		{"at the depth limit", deep(MaxInputDepth), nil},
		{"one level deeper", deep(MaxInputDepth + 1), ErrInputTooDeep},
		{"80,000 deep", deep(80000), ErrInputTooDeep},
		{"over the size limit", []byte(`{"a":"` + strings.Repeat("x", MaxInput) + `"}`), ErrInputTooLarge},
		{"invalid UTF-8", []byte("{\"a\":\"\xff\"}"), ErrInputNotObject},
		{"array", []byte(`[1]`), ErrInputNotObject},
	} {
		err := CheckInput(tc.input)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, tc.want) || !errors.Is(err, reason.ErrInputDenied) {
			t.Errorf("%s: err = %v, want input_denied and %v", tc.name, err, tc.want)
		}
	}
}

// FuzzCheckInput checks that CheckInput accepts only what its contract
// allows (one object, at most MaxInput bytes, at most MaxInputDepth deep)
// and refuses everything else as input_denied.
func FuzzCheckInput(f *testing.F) {
	f.Add([]byte(`{"q":"x"}`))
	f.Add([]byte(`{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`))
	f.Add([]byte(`{"a":"` + strings.Repeat("[", 200) + `"}`))
	f.Add([]byte("{\"a\":\"\x00\xff\"}"))
	f.Add([]byte(`{}{}`))
	f.Fuzz(func(t *testing.T, input []byte) {
		err := CheckInput(input)
		if err != nil {
			if !errors.Is(err, reason.ErrInputDenied) {
				t.Fatalf("refusal %v is not input_denied", err)
			}
			return
		}
		if len(input) > MaxInput {
			t.Fatalf("accepted %d bytes", len(input))
		}
		dec := json.NewDecoder(bytes.NewReader(input))
		depth, deepest := 0, 0
		first := true
		for {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			if first && tok != json.Delim('{') {
				t.Fatalf("accepted a %v", tok)
			}
			first = false
			switch tok {
			case json.Delim('{'), json.Delim('['):
				depth++
				deepest = max(deepest, depth)
			case json.Delim('}'), json.Delim(']'):
				depth--
			}
		}
		if deepest > MaxInputDepth {
			t.Fatalf("accepted depth %d", deepest)
		}
	})
}
