package jsondepth

import (
	"strings"
	"testing"
)

func TestExceeds(t *testing.T) {
	cases := []struct {
		doc    string
		max    int
		over   bool
		offset int
	}{
		{`{"a":1}`, 1, false, 0},
		{`[[1]]`, 1, true, 1},
		{`[[1]]`, 2, false, 0},
		{`{"a":"[[[[[[[["}`, 1, false, 0},           // brackets in strings do not count
		{`{"a":"\"[[[["}`, 1, false, 0},             // nor after an escaped quote
		{`[] [] [] [[]]`, 1, true, 10},              // depth returns to 0 between values
		{`]]]][[`, 1, true, 5},                      // stray closers never go below 0
		{strings.Repeat("[", 100000), 64, true, 64}, // unterminated, stops at once
	}
	for _, c := range cases {
		off, over := Exceeds([]byte(c.doc), c.max)
		if over != c.over || off != c.offset {
			t.Errorf("Exceeds(%.20q, %d) = %d, %v; want %d, %v", c.doc, c.max, off, over, c.offset, c.over)
		}
	}
}
