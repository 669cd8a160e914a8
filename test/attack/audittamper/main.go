// Command audittamper is the attacker of the audit anchor scripts: someone
// who can write the audit log's files (not the OS keychain) and knows the
// record format of specs/audit.md, and so can recompute every hash. It
// works on the bytes with nothing but that spec.
//
//	audittamper truncate FILE N   drop the last N records
//	audittamper rechain FILE SEQ  flip record SEQ's decision, re-chain every record from it on
//	audittamper forge FILE        append a record that continues the chain correctly
//	audittamper anchor-unseal ANCHOR LOG  replace both slots of the anchor with unsealed ones naming LOG's last record
//	audittamper anchor-tear ANCHOR newest|older|both  make a slot of the anchor fail its checksum, as a torn write does
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
		fail("usage: audittamper truncate FILE N | rechain FILE SEQ | forge FILE | anchor-unseal ANCHOR LOG | anchor-tear ANCHOR newest|older|both")
	}
	switch os.Args[1] {
	case "anchor-unseal":
		anchorUnseal(os.Args[2], arg(3))
		return
	case "anchor-tear":
		anchorTear(os.Args[2], arg(3))
		return
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

// The anchor file (specs/audit.md, "The anchor"): two slots of slotSize
// bytes, each a JSON object whose last member is "sum", the hex SHA-256 of
// the object's text without that member, padded with spaces, ending in a
// newline.
const slotSize = 4096

var sumRE = regexp.MustCompile(`,"sum":"[0-9a-f]{64}"\}$`)

type slot struct {
	Gen uint64 `json:"gen"`
	Dir string `json:"dir"`
}

// readSlots returns the anchor file and its slots (nil where a slot is not
// a JSON object).
func readSlots(path string) ([]byte, [2]*slot) {
	data, err := os.ReadFile(path)
	if err != nil {
		fail(err.Error())
	}
	if len(data) != 2*slotSize {
		fail("not an anchor file")
	}
	var slots [2]*slot
	for i := range slots {
		text := bytes.TrimRight(data[i*slotSize:(i+1)*slotSize], " \n")
		var s slot
		if json.Unmarshal(text, &s) == nil {
			slots[i] = &s
		}
	}
	return data, slots
}

// encodeSlot is text (a JSON object) with its sum, padded to a slot.
func encodeSlot(text []byte) []byte {
	sum := sha256.Sum256(text)
	out := append(text[:len(text)-1:len(text)-1], []byte(`,"sum":"`+hex.EncodeToString(sum[:])+`"}`)...)
	if !sumRE.Match(out) || len(out) >= slotSize {
		fail("cannot encode the slot")
	}
	out = append(out, bytes.Repeat([]byte(" "), slotSize-1-len(out))...)
	return append(out, '\n')
}

// anchorUnseal writes what agentnode writes without a keychain, naming the
// last record of the log as the head: both slots unsealed commits, with
// generations above the old ones.
func anchorUnseal(path, logPath string) {
	_, slots := readSlots(path)
	var gen uint64
	dir := ""
	for _, s := range slots {
		if s != nil {
			gen, dir = max(gen, s.Gen), s.Dir
		}
	}
	logData, err := os.ReadFile(logPath)
	if err != nil {
		fail(err.Error())
	}
	lines := bytes.Split(bytes.TrimSuffix(logData, []byte("\n")), []byte("\n"))
	last := lines[len(lines)-1]
	m := seqRE.FindSubmatch(last)
	h := regexp.MustCompile(`"hash":"([0-9a-f]{64})"\}$`).FindSubmatch(last)
	if m == nil || h == nil {
		fail("the log's last line is not a record")
	}
	dirJSON, _ := json.Marshal(dir)
	var out []byte
	for i := range 2 {
		text := fmt.Sprintf(`{"gen":%d,"version":2,"dir":%s,"head":{"seq":%s,"hash":"%s"},"seal":null}`, gen+1+uint64(i), dirJSON, m[1], h[1])
		out = append(out, encodeSlot([]byte(text))...)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		fail(err.Error())
	}
}

// anchorTear zeroes the first 512 bytes (a sector) of the newest, the
// older or both slots.
func anchorTear(path, which string) {
	data, slots := readSlots(path)
	if slots[0] == nil || slots[1] == nil {
		fail("a slot is already torn")
	}
	newest := 0
	if slots[1].Gen > slots[0].Gen {
		newest = 1
	}
	var tear []int
	switch which {
	case "newest":
		tear = []int{newest}
	case "older":
		tear = []int{1 - newest}
	case "both":
		tear = []int{0, 1}
	default:
		fail("newest, older or both, not " + which)
	}
	for _, i := range tear {
		copy(data[i*slotSize:], make([]byte, 512))
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
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
