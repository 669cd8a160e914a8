// Command audittamper is the attacker of the audit anchor scripts: someone
// who can write the audit log's files (not the OS keychain) and knows the
// record format of specs/audit.md, and so can recompute every hash. It
// works on the bytes with nothing but that spec.
//
//	audittamper truncate FILE N   drop the last N records
//	audittamper rechain FILE SEQ  flip record SEQ's decision, re-chain every record from it on
//	audittamper forge FILE        append a record that continues the chain correctly
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strconv"
)

var (
	hashRE = regexp.MustCompile(`,"hash":"[0-9a-f]{64}"\}$`)
	prevRE = regexp.MustCompile(`"prev":"[0-9a-f]{64}"`)
	seqRE  = regexp.MustCompile(`^\{"seq":([0-9]+),`)
)

// rehash gives a line (without newline) the hash the spec defines: SHA-256
// of the line without its hash member.
func rehash(line []byte) ([]byte, string) {
	body := append(hashRE.ReplaceAll(line, nil), '}')
	sum := sha256.Sum256(body)
	h := hex.EncodeToString(sum[:])
	return append(body[:len(body)-1], []byte(`,"hash":"`+h+`"}`)...), h
}

func main() {
	if len(os.Args) < 3 {
		fail("usage: audittamper truncate FILE N | rechain FILE SEQ | forge FILE")
	}
	path := os.Args[2]
	data, err := os.ReadFile(path)
	if err != nil {
		fail(err.Error())
	}
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	if len(data) == 0 {
		fail("empty log")
	}
	switch os.Args[1] {
	case "truncate":
		n := atoi(arg(3))
		if n > len(lines) {
			fail("not that many records")
		}
		lines = lines[:len(lines)-n]
	case "rechain":
		seq := atoi(arg(3))
		prev := ""
		found := false
		for i, line := range lines {
			m := seqRE.FindSubmatch(line)
			if m == nil {
				fail("not a record: " + string(line))
			}
			if atoi(string(m[1])) == seq {
				found = true
				flipped := bytes.Replace(line, []byte(`"decision":"allow"`), []byte(`"decision":"deny"`), 1)
				if bytes.Equal(flipped, line) {
					flipped = bytes.Replace(line, []byte(`"decision":"deny"`), []byte(`"decision":"allow"`), 1)
				}
				line = flipped
			} else if !found {
				continue
			}
			if prev != "" {
				line = prevRE.ReplaceAll(line, []byte(`"prev":"`+prev+`"`))
			}
			lines[i], prev = rehash(line)
		}
		if !found {
			fail("no record with that seq")
		}
	case "forge":
		last := lines[len(lines)-1]
		m := seqRE.FindSubmatch(last)
		h := regexp.MustCompile(`"hash":"([0-9a-f]{64})"`).FindSubmatch(last)
		if m == nil || h == nil {
			fail("last line is not a record")
		}
		seq := atoi(string(m[1])) + 1
		rec := fmt.Sprintf(`{"seq":%d,"ts":"2026-01-02T03:04:05Z","event":"decision","request_id":"forged","package":"hello-tools","version":"1.0.0","tool":"echo","action":"read","trust":"trusted","placement":"host","backend":"","decision":"allow","code":"","reason":"nothing to see here","guard_chain":[],"env":{"ci":false,"interactive":false,"secrets_present":false,"root":false},"prev":"%s","hash":"%s"}`,
			seq, h[1], hex.EncodeToString(make([]byte, 32)))
		line, _ := rehash([]byte(rec))
		lines = append(lines, line)
	default:
		fail("unknown mode " + os.Args[1])
	}
	out := bytes.Join(lines, []byte("\n"))
	if len(lines) > 0 {
		out = append(out, '\n')
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		fail(err.Error())
	}
}

func arg(i int) string {
	if len(os.Args) <= i {
		fail("missing argument")
	}
	return os.Args[i]
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fail("not a number: " + s)
	}
	return n
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "audittamper:", msg)
	os.Exit(2)
}
