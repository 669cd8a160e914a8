// Package jsonstr is agentnode's one hand-written JSON string escaper, for
// the two canonical serializations whose bytes are hashed and so must be
// exact:
//
//   - Append, encoding/json's escaping without HTML escaping, for audit
//     records (kernel/audit), which are built by hand into one buffer;
//   - AppendPython, Python's json.dumps(ensure_ascii=False) escaping, for
//     the lockfile's canonical form (kernel/lockfile), which Python tools
//     reproduce and encoding/json cannot write.
//
// Both are one loop. It is not kept for speed: Append is as fast as
// encoding/json on one string (BenchmarkAppend 650-790 ns, 0 allocations,
// against BenchmarkAppendEncodingJSON 720-770 ns, 1 allocation, for a
// 280-byte reason with quotes and newlines, 2 cores), but it appends into
// the caller's buffer, and the Python form needs the loop anyway.
// FuzzAppend (test/run.sh) holds both to encoding/json: Append byte for
// byte on any string, AppendPython on valid UTF-8 with U+2028 and U+2029
// left raw (the one difference), and both decode back to the string.
//
// It is in the trusted core because the audit log and the lockfile, whose bytes
// are hashed, are written with it.
package jsonstr

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// Append appends s as a JSON string exactly as encoding/json encodes it
// with SetEscapeHTML(false): `"` and `\` escaped, \b \f \n \r \t, other
// control characters as \u00xx, U+2028 and U+2029 as \u2028 and \u2029,
// invalid UTF-8 as \ufffd, everything else verbatim.
func Append(dst []byte, s string) []byte { return appendString(dst, s, false) }

// AppendPython appends s quoted the way Python's json module does with
// ensure_ascii=False: \" \\ \n \r \t \b \f, other characters below U+0020
// as \u00xx (lower-case hex), everything else (U+2028, U+2029, any byte
// from 0x80 on) raw.
func AppendPython(dst []byte, s string) []byte { return appendString(dst, s, true) }

func appendString(dst []byte, s string, python bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		if python {
			i++
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
