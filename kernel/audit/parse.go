package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Line is what the chain needs from one line (ParseLine).
type Line struct {
	Seq  uint64
	Prev []byte // 64 lower-case hex digits, aliasing the line
	Hash []byte // 64 lower-case hex digits, aliasing the line
	// Event, RequestID and Decision pair a run's decision with its
	// outcome; they alias the line (the JSON string contents, escapes
	// not decoded: Append writes request ids as plain hex).
	Event, RequestID, Decision []byte
}

// Problems of a line that is not a valid record (ParseLine); the
// verifier's report names them (cmd/agentnode/auditverify).
const (
	ProblemParseError      = "parse_error"      // a line is not a JSON record in the record layout
	ProblemSchemaViolation = "schema_violation" // JSON, but not valid against the record schema
)

// maxSafe is the largest integer a JSON number holds exactly (2^53-1), the
// schema's maximum for seq and duration_ms.
const maxSafe = 1<<53 - 1

// scanCanonical checks a line (without its newline) in the canonical layout
// Append writes: exactly the members of Record in order, no whitespace. It
// accepts only lines the JSON Schema accepts (every enum, pattern, range and
// the date-time format are checked here) and allocates nothing, which makes
// verifying fast. A line it rejects is not necessarily invalid: the caller then
// decides with the schema itself (parseSlow). parse_test.go cross-checks the
// two on mutated and fuzzed lines.
func scanCanonical(line []byte) (Line, bool) {
	var li Line
	if !utf8.Valid(line) {
		return li, false
	}
	s := scanner{b: line}
	var ok bool
	if !s.lit(`{"seq":`) {
		return li, false
	}
	if li.Seq, ok = s.uint(); !ok || li.Seq == 0 {
		return li, false
	}
	if !s.lit(`,"ts":`) || !s.plain(isTimestamp) {
		return li, false
	}
	if !s.lit(`,"event":`) {
		return li, false
	}
	start := s.i
	if !s.plain(isEvent) {
		return li, false
	}
	li.Event = s.b[start+1 : s.i-1]
	for i, key := range [...]string{`,"request_id":`, `,"package":`, `,"version":`, `,"tool":`, `,"action":`} {
		start = s.i + len(key)
		if !s.lit(key) || !s.str() {
			return li, false
		}
		if i == 0 {
			li.RequestID = s.b[start+1 : s.i-1]
		}
	}
	if !s.lit(`,"trust":`) || !s.plain(isTrust) ||
		!s.lit(`,"placement":`) || !s.plain(isPlacement) ||
		!s.lit(`,"backend":`) || !s.str() ||
		!s.lit(`,"decision":`) {
		return li, false
	}
	start = s.i
	if !s.plain(isDecision) {
		return li, false
	}
	li.Decision = s.b[start+1 : s.i-1]
	if !s.lit(`,"code":`) || !s.plain(isCode) ||
		!s.lit(`,"reason":`) || !s.str() ||
		!s.lit(`,"guard_chain":[`) {
		return li, false
	}
	if !s.lit(`]`) {
		for {
			if !s.str() {
				return li, false
			}
			if s.lit(`]`) {
				break
			}
			if !s.lit(`,`) {
				return li, false
			}
		}
	}
	if !s.lit(`,"env":{"ci":`) || !s.bool() ||
		!s.lit(`,"interactive":`) || !s.bool() ||
		!s.lit(`,"secrets_present":`) || !s.bool() ||
		!s.lit(`,"root":`) || !s.bool() || !s.lit(`}`) {
		return li, false
	}
	if s.lit(`,"workspace":`) && !s.str() || s.lit(`,"runtime":`) && !s.str() {
		return li, false
	}
	if s.lit(`,"exit_code":`) && !s.int32() {
		return li, false
	}
	if s.lit(`,"duration_ms":`) {
		if _, ok := s.uint(); !ok {
			return li, false
		}
	}
	if !s.lit(`,"prev":"`) {
		return li, false
	}
	if li.Prev, ok = s.hex64(); !ok || !s.lit(`"`) {
		return li, false
	}
	if !s.lit(`,"hash":"`) {
		return li, false
	}
	if li.Hash, ok = s.hex64(); !ok || !s.lit(`"}`) || s.i != len(s.b) {
		return li, false
	}
	return li, true
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) lit(l string) bool {
	if len(s.b)-s.i < len(l) || string(s.b[s.i:s.i+len(l)]) != l {
		return false
	}
	s.i += len(l)
	return true
}

func (s *scanner) bool() bool { return s.lit("true") || s.lit("false") }

// uint scans a JSON integer in 0..2^53-1 without sign, fraction or exponent.
func (s *scanner) uint() (uint64, bool) {
	start := s.i
	var v uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		if s.i-start == 16 {
			return 0, false
		}
		v = v*10 + uint64(s.b[s.i]-'0')
		s.i++
	}
	n := s.i - start
	if n == 0 || (n > 1 && s.b[start] == '0') || v > maxSafe {
		return 0, false
	}
	return v, true
}

// int32 scans a JSON integer in the int32 range.
func (s *scanner) int32() bool {
	neg := s.lit("-")
	v, ok := s.uint()
	if !ok || (neg && v == 0) {
		return false
	}
	if neg {
		return v <= 1<<31
	}
	return v < 1<<31
}

// str scans a JSON string: no raw control characters, only valid escapes.
// (The line is valid UTF-8, checked once by scanCanonical.)
func (s *scanner) str() bool {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return false
	}
	s.i++
	for s.i < len(s.b) {
		c := s.b[s.i]
		if charClass[c]&strSpecial == 0 {
			s.i++
			continue
		}
		switch {
		case c == '"':
			s.i++
			return true
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) || !isHex(s.b[s.i+2:s.i+6], true) {
					return false
				}
				s.i += 6
			default:
				return false
			}
		default: // a raw control character
			return false
		}
	}
	return false
}

// plain scans a string without escapes whose content satisfies ok.
func (s *scanner) plain(ok func([]byte) bool) bool {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return false
	}
	end := bytes.IndexByte(s.b[s.i+1:], '"')
	if end < 0 {
		return false
	}
	v := s.b[s.i+1 : s.i+1+end]
	if !ok(v) {
		return false
	}
	s.i += end + 2
	return true
}

func (s *scanner) hex64() ([]byte, bool) {
	if len(s.b)-s.i < 64 || !isHex(s.b[s.i:s.i+64], false) {
		return nil, false
	}
	v := s.b[s.i : s.i+64]
	s.i += 64
	return v, true
}

// isHex: lower-case hex digits only, or any case when upper.
func isHex(b []byte, upper bool) bool {
	want := hexLower
	if upper {
		want |= hexUpper
	}
	for _, c := range b {
		if charClass[c]&want == 0 {
			return false
		}
	}
	return true
}

// Character classes for the scanner.
const (
	hexLower   uint8 = 1 << iota // 0-9 a-f
	hexUpper                     // A-F
	strSpecial                   // '"', '\\' and control characters: end the fast path inside strings
)

var charClass = func() (t [256]uint8) {
	for c := range 256 {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
			t[c] = hexLower
		case c >= 'A' && c <= 'F':
			t[c] = hexUpper
		case c < 0x20, c == '"', c == '\\':
			t[c] = strSpecial
		}
	}
	return t
}()

func isTrust(v []byte) bool {
	switch string(v) {
	case "", "unknown", "unverified", "verified", "trusted", "curated":
		return true
	}
	return false
}

func isPlacement(v []byte) bool {
	switch string(v) {
	case "host", "sandbox", "none":
		return true
	}
	return false
}

func isDecision(v []byte) bool {
	switch string(v) {
	case "allow", "prompt", "deny":
		return true
	}
	return false
}

// isWord matches [a-z][a-z0-9_]{0,63}.
func isWord(v []byte) bool {
	if len(v) == 0 || len(v) > 64 || v[0] < 'a' || v[0] > 'z' {
		return false
	}
	for _, c := range v[1:] {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

func isEvent(v []byte) bool { return isWord(v) }
func isCode(v []byte) bool  { return len(v) == 0 || isWord(v) }

// isTimestamp matches YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z with a valid calendar
// date, hour ≤ 23, minute ≤ 59 and second ≤ 59: a subset of both the
// schema's pattern and RFC 3339 date-time.
func isTimestamp(v []byte) bool {
	if len(v) < 20 || v[4] != '-' || v[7] != '-' || v[10] != 'T' || v[13] != ':' || v[16] != ':' || v[len(v)-1] != 'Z' {
		return false
	}
	num := func(b []byte) int {
		n := 0
		for _, c := range b {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	y, mo, d := num(v[0:4]), num(v[5:7]), num(v[8:10])
	h, mi, sec := num(v[11:13]), num(v[14:16]), num(v[17:19])
	if y < 0 || mo < 1 || mo > 12 || d < 1 || d > daysIn(mo, y) || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 {
		return false
	}
	frac := v[19 : len(v)-1]
	if len(frac) == 0 {
		return true
	}
	return frac[0] == '.' && len(frac) >= 2 && len(frac) <= 10 && num(frac[1:]) >= 0
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// parseSlow decides a line scanCanonical did not accept: it must be JSON, be
// valid against specs/schema/audit-record.schema.json, decode into a Record,
// and end with its hash member (the hash covers the bytes before it). It
// returns the problem and a detail when the line is not a valid record.
func parseSlow(line []byte) (li Line, problem, detail string) {
	if !json.Valid(line) {
		return li, ProblemParseError, "not valid JSON: " + jsonError(line)
	}
	if err := validateSchema(line); err != nil {
		var ve *schemaViolation
		if errors.As(err, &ve) {
			return li, ProblemSchemaViolation, ve.Error()
		}
		return li, ProblemParseError, err.Error()
	}
	var r Record
	if err := json.Unmarshal(line, &r); err != nil {
		return li, ProblemParseError, err.Error()
	}
	n := len(line)
	if n < hashSuffixLen || !bytes.HasPrefix(line[n-hashSuffixLen:], []byte(`,"hash":"`)) ||
		string(line[n-2:]) != `"}` || string(line[n-66:n-2]) != r.Hash {
		return li, ProblemParseError, `the hash member is not the last member of the record, as ,"hash":"<64 hex>"}`
	}
	li.Seq = r.Seq
	li.Event, li.RequestID, li.Decision = []byte(r.Event), []byte(r.RequestID), []byte(r.Decision)
	li.Prev = []byte(r.Prev)
	li.Hash = line[n-66 : n-2]
	return li, "", ""
}

// ParseLine reads one line of the log (without its newline): its chain
// fields, or the problem (ProblemParseError, ProblemSchemaViolation) and a
// detail when it is not a valid record. A line in the layout Append writes
// is checked by scanCanonical without allocating, and with schema by the
// JSON Schema validator too (slow); any other line by parseSlow. It is the
// one line reader of the log: Append's recovery and the verifier
// (cmd/agentnode/auditverify) use it.
func ParseLine(line []byte, schema bool) (li Line, problem, detail string) {
	li, ok := scanCanonical(line)
	if !ok {
		return parseSlow(line)
	}
	if schema {
		if err := validateSchema(line); err != nil {
			return li, ProblemSchemaViolation, err.Error()
		}
	}
	return li, "", ""
}

// parseLine is ParseLine without the schema, with the problem as an error.
func parseLine(line []byte) (Line, error) {
	li, p, detail := ParseLine(line, false)
	if p != "" {
		return li, fmt.Errorf("%s: %s", p, detail)
	}
	return li, nil
}

func jsonError(line []byte) string {
	var v any
	if err := json.Unmarshal(line, &v); err != nil {
		return err.Error()
	}
	return "invalid"
}
