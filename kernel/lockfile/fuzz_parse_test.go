package lockfile_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	. "github.com/agentnode/agentnode/kernel/lockfile"
)

// FuzzParseValue holds the scanner to the decoder-based parser it
// replaced: on any input both accept with equal trees (numbers as written,
// key order, strings) or both refuse with ErrInvalid. Seeds are below and
// in testdata/fuzz/FuzzParseValue.
func FuzzParseValue(f *testing.F) {
	for _, s := range []string{
		``, ` `, `{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.0`, `1.50e+10`, `-12.5E-3`, `"x"`,
		`01`, `-`, `1.`, `.5`, `+1`, `1e`, `1e+`, `[1,]`, `{"a":1,}`, `{,}`, `[,1]`, `{"a" 1}`, `{"a":}`,
		`{1:2}`, `truefalse`, `[true false]`, `nul`, `"\x01"`, "\"\t\"", `"\q"`, `"\u12"`, `"\u12G4"`,
		`"\ud83d\ude00"`, `"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\ud800\ud800\udc00"`, `"\\ud800"`,
		`"\"\\\/\b\f\n\r\t"`, `"\u00e9\u2028<>&"`, `"é"`, "\"\xff\"", `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`,
		`{"a":{"b":[{"c":1,"c":1}]}}`, `{"lockfile_version":"0.1","packages":{"p":{"version":"1.0"}}}`,
		`{"a":[1,2,{"b":null}]} `, `{"a":1} x`, `{"a":1}{}`, "\ufeff{}", `[` + strings.Repeat(`[`, 129) + strings.Repeat(`]`, 130),
		strings.Repeat(`[`, 129) + strings.Repeat(`]`, 129), strings.Repeat(`[`, 128) + `1` + strings.Repeat(`]`, 128),
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k3":3}`,
	} {
		f.Add([]byte(s))
	}
	f.Add([]byte(strings.Repeat(`{"a":`, 80000) + `1` + strings.Repeat(`}`, 80000))) // the attack suite's depth
	f.Add(specBlock(f, "lockfile"))
	f.Add(bigLockfile(f, 2))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseValue(data)
		want, werr := DecoderParseValue(data)
		if (err == nil) != (werr == nil) {
			t.Fatalf("scanner: %v, decoder: %v", err, werr)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("trees differ:\nscanner %s\ndecoder %s", Canonical(got), Canonical(want))
		}
	})
}

// BenchmarkParseValue1000 is the scanner alone on a 1,000-entry lockfile,
// next to BenchmarkDecoderParseValue1000 (what it replaced) and
// BenchmarkRawBaseline1000 (encoding/json into interfaces, plus SHA-256).
func BenchmarkParseValue1000(b *testing.B) {
	data := bigLockfile(b, 1000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseValue(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecoderParseValue1000(b *testing.B) {
	data := bigLockfile(b, 1000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecoderParseValue(data); err != nil {
			b.Fatal(err)
		}
	}
}
