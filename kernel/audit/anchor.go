package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentnode/agentnode/kernel/keychain"
	"github.com/agentnode/agentnode/kernel/lockfile"
	"github.com/agentnode/agentnode/sdk/atomicfile"
)

// The anchor: the head of the chain (seq and hash of the newest record),
// kept in a small file outside the log and sealed with the lockfile's keyed
// seal (lockfile.MAC, HMAC-SHA256 under the seal key in the OS keychain), so
// that cutting off, rewriting or extending the log, or emptying or deleting
// it, no longer goes unseen (specs/audit.md, "The anchor").
//
// The file has two fixed-size slots, each a complete sealed anchor with a
// generation number and a checksum, rewritten in place in turn (pwrite and
// one fdatasync, no temporary file, rename or directory sync): the newest
// intact slot is the anchor, and a slot torn by a crash in the middle of
// its write fails its checksum while the other still holds the state
// before it.
//
// Append writes the anchor twice around each record: before the record, an
// intent naming the record about to be written (pending: its seq and
// hash); after the record is durable, the commit naming it as the head.
// After a crash between the two, the log may end at the head or at the
// pending record, and nothing else: no slack is left for an attacker once
// an append has finished. A torn slot leaves even less: the slot before it
// says exactly where the log ends (AnchorState.expect).

// Anchor says where the head of a log is sealed and with which key.
type Anchor struct {
	// Path is the anchor file (home.AuditAnchorPath).
	Path string
	// Key returns the seal key for an anchor sealed under keyID, or, with
	// keyID "", the key to seal with. It may return a key with another
	// key_id (the seal check then says so). An error wrapping
	// keychain.ErrUnavailable means there is no OS keychain: the anchor is
	// then written unsealed, unless it was sealed before. Any other error
	// refuses the append.
	Key func(keyID string) ([]byte, error)
	// Witness is the OS keychain service of the log's witness (the newest
	// head seen by agentnode, set when the log is first sealed and by each
	// verify that passes, to notice a deleted anchor or a rollback of log
	// and anchor together); "" for none.
	Witness string
}

const (
	// WitnessService is the keychain service of audit witnesses; the user
	// is the log's directory.
	WitnessService = "agentnode-audit-witness"
	anchorVersion  = 2
	anchorLabel    = "agentnode audit anchor v2\n" // the MAC input starts with it
	// anchorSlotSize is the size of one slot (one page: a slot is written
	// with a single pwrite of one aligned page); the file is two slots.
	anchorSlotSize = 4096
	anchorFileSize = 2 * anchorSlotSize
)

// HomeAnchor is the anchor of a home's audit log: the file path, the
// lockfile seal key (SealKey) and the witness in the keychain.
func HomeAnchor(path string) *Anchor {
	return &Anchor{Path: path, Key: SealKey, Witness: WitnessService}
}

// SealKey is the key an append seals with: lockfile.LoadOrCreateKeyFor, from the
// kernel keyring's cache when keyID (the anchor's) is cached there, else
// from the OS keychain (creating the key there if there is none). The key
// is kept in memory only, never written to a file.
func SealKey(keyID string) ([]byte, error) { return lockfile.LoadOrCreateKeyFor(keyID) }

// head is a position in the chain: a record's seq and hash (0 and Genesis
// before the first record).
type Head struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

// anchorBody is what the seal covers: one slot's content.
type anchorBody struct {
	Gen     uint64 `json:"gen"` // +1 per slot write; the newest intact slot is the anchor
	Version int    `json:"version"`
	Dir     string `json:"dir"` // the log's directory (canonical): the anchor is bound to it
	Head    Head   `json:"head"`
	Pending *Head  `json:"pending,omitempty"` // the record an unfinished append was writing
}

type anchorSeal struct {
	Algorithm string `json:"algorithm"`
	KeyID     string `json:"key_id"`
	MAC       string `json:"mac"`
}

// anchorSlot is one slot as written, without its checksum.
type anchorSlot struct {
	anchorBody
	Seal *anchorSeal `json:"seal"` // null: unsealed (written without a keychain)
}

func (b *anchorBody) macInput() []byte {
	data, _ := json.Marshal(b) // a struct of strings and integers: cannot fail
	return append([]byte(anchorLabel), data...)
}

// sumMember is the checksum member that ends every slot's JSON object.
const (
	sumMember = `,"sum":"`
	sumTail   = len(sumMember) + 64 + len(`"}`)
)

// encodeSlot is b as a slot: the JSON object of b and its seal (null
// without a key), its "sum" member (hex SHA-256 of that object's text
// without the sum member) last, padded with spaces to anchorSlotSize
// bytes, the last a newline.
func (b *anchorBody) encodeSlot(key []byte) ([]byte, error) {
	s := anchorSlot{anchorBody: *b}
	if key != nil {
		s.Seal = &anchorSeal{Algorithm: lockfile.AlgorithmSeal, KeyID: lockfile.KeyID(key), MAC: lockfile.MAC(key, b.macInput())}
	}
	text, _ := json.Marshal(&s)
	sum := sha256.Sum256(text)
	out := make([]byte, 0, anchorSlotSize)
	out = append(out, text[:len(text)-1]...)
	out = append(out, sumMember...)
	out = hex.AppendEncode(out, sum[:])
	out = append(out, `"}`...)
	if len(out) > anchorSlotSize-1 {
		return nil, fmt.Errorf("the audit directory's path (%d bytes) is too long for an anchor slot of %d bytes", len(b.Dir), anchorSlotSize)
	}
	for len(out) < anchorSlotSize-1 {
		out = append(out, ' ')
	}
	return append(out, '\n'), nil
}

// decodeSlot reads one slot: nil and no error if it is not intact (its
// checksum does not match: torn by a crash, or overwritten), an error if
// it is intact but not a valid anchor.
func decodeSlot(raw []byte) (*anchorSlot, error) {
	text := bytes.TrimRight(raw, " \n")
	n := len(text)
	if n < sumTail+2 || !bytes.Equal(text[n-sumTail:n-sumTail+len(sumMember)], []byte(sumMember)) || !bytes.HasSuffix(text, []byte(`"}`)) {
		return nil, nil
	}
	want, err := hex.DecodeString(string(text[n-sumTail+len(sumMember) : n-2]))
	body := append(bytes.Clone(text[:n-sumTail]), '}')
	if sum := sha256.Sum256(body); err != nil || !bytes.Equal(sum[:], want) {
		return nil, nil
	}
	var s anchorSlot
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("a slot is not an anchor: %w", err)
	}
	if dec.More() {
		return nil, errors.New("a slot has data after the anchor")
	}
	ok := s.Version == anchorVersion && s.Gen > 0 && s.Dir != "" && validHead(s.Head) &&
		(s.Pending == nil || validHead(*s.Pending) && s.Pending.Seq == s.Head.Seq+1)
	if se := s.Seal; se != nil {
		ok = ok && se.Algorithm == lockfile.AlgorithmSeal && len(se.MAC) == 64 && isHex([]byte(se.MAC), false) && se.KeyID != ""
	}
	if !ok {
		return nil, errors.New("a slot is malformed (gen, version, dir, head, pending or seal)")
	}
	return &s, nil
}

func validHead(h Head) bool {
	return len(h.Hash) == 64 && isHex([]byte(h.Hash), false) && (h.Seq > 0 || h.Hash == Genesis)
}

// AnchorState is the anchor file as read: its two slots.
type AnchorState struct {
	slots [2]*anchorSlot // nil: not intact
	cur   int            // the newest intact slot
}

func (s *AnchorState) newest() *anchorSlot { return s.slots[s.cur] }

// Dir is the log directory the anchor is bound to.
func (s *AnchorState) Dir() string { return s.newest().Dir }

// torn reports whether one slot is not intact.
func (s *AnchorState) Torn() bool { return s.slots[0] == nil || s.slots[1] == nil }

func (s *AnchorState) Sealed() bool { return s.newest().Seal != nil }

func (s *AnchorState) KeyID() string {
	if s.Sealed() {
		return s.newest().Seal.KeyID
	}
	return ""
}

// expect is where the log must end: at head, or (after a crash between an
// intent and its commit) at pending. With one slot not intact, its write
// was the one after the newest intact slot's, and began only when that
// slot's state was complete: after an intent, the record it names was
// durable (the write torn was its commit); after a commit, the next record
// was not yet written (the write torn was the next intent). So the log
// must end exactly at the intent's pending record or at the commit's head.
// An attacker who makes a slot fail its checksum gains nothing by it.
func (s *AnchorState) Expect() (h Head, pending *Head) {
	n := s.newest()
	switch {
	case !s.Torn():
		return n.Head, n.Pending
	case n.Pending != nil:
		return *n.Pending, nil
	}
	return n.Head, nil
}

// matches reports whether the log ending at h is what the anchor allows.
func (s *AnchorState) Matches(h Head) bool {
	e, p := s.Expect()
	return h == e || p != nil && h == *p
}

// checkSeal checks the seal of every intact slot under key: "" if they
// hold, else why not.
func (s *AnchorState) CheckSeal(key []byte) string {
	id := lockfile.KeyID(key)
	for _, sl := range s.slots {
		if sl == nil {
			continue
		}
		if sl.Seal.KeyID != id {
			return fmt.Sprintf("the anchor was sealed with another key (key_id %s), not this machine's (key_id %s)", sl.Seal.KeyID, id)
		}
		if !lockfile.MACEqual(sl.Seal.MAC, lockfile.MAC(key, sl.macInput())) {
			return "the anchor's seal does not match its content: it was changed after it was sealed"
		}
	}
	return ""
}

// ErrNoAnchor: the anchor file does not exist.
var ErrNoAnchor = errors.New("no anchor")

// openAnchor opens the anchor file (read-write for an append) and reads
// it: ErrNoAnchor if it does not exist; an error if it is not a regular
// file of two slots, neither slot is intact, or the intact slots disagree
// (generation, directory, sealed or not). The seal is not checked here.
func openAnchor(path string, write bool) (*os.File, *AnchorState, error) {
	flags := os.O_RDONLY
	if write {
		flags = os.O_RDWR
	}
	f, err := os.OpenFile(path, flags|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, ErrNoAnchor
	}
	if err != nil {
		return nil, nil, err
	}
	st, err := loadAnchor(f, path)
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

func loadAnchor(f *os.File, path string) (*AnchorState, error) {
	var fi unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &fi); err != nil {
		return nil, err
	}
	if fi.Mode&unix.S_IFMT != unix.S_IFREG || fi.Size != anchorFileSize {
		head := make([]byte, 16)
		n, _ := f.ReadAt(head, 0)
		if bytes.HasPrefix(head[:n], []byte(`{"version":1,`)) {
			return nil, fmt.Errorf("anchor %s is in the earlier one-object format (version 1), which is no longer read: check the log with `agentnode audit verify`, then anchor it anew with `agentnode audit reanchor`", path)
		}
		return nil, fmt.Errorf("anchor %s is not an anchor file (a regular file of %d bytes)", path, anchorFileSize)
	}
	buf := make([]byte, anchorFileSize)
	if _, err := f.ReadAt(buf, 0); err != nil {
		return nil, err
	}
	var st AnchorState
	for i := range st.slots {
		sl, err := decodeSlot(buf[i*anchorSlotSize : (i+1)*anchorSlotSize])
		if err != nil {
			return nil, fmt.Errorf("anchor %s: slot %d: %w", path, i, err)
		}
		st.slots[i] = sl
	}
	a, b := st.slots[0], st.slots[1]
	switch {
	case a == nil && b == nil:
		return nil, fmt.Errorf("anchor %s: neither of its two slots is intact", path)
	case a == nil:
		st.cur = 1
	case b == nil:
		st.cur = 0
	case a.Gen == b.Gen || a.Dir != b.Dir || (a.Seal == nil) != (b.Seal == nil):
		return nil, fmt.Errorf("anchor %s: its two slots disagree (same generation, another directory, or one sealed and the other not)", path)
	case b.Gen > a.Gen:
		st.cur = 1
	}
	return &st, nil
}

// ReadAnchor reads the anchor file; see openAnchor.
func ReadAnchor(path string) (*AnchorState, error) {
	f, st, err := openAnchor(path, false)
	if err != nil {
		return nil, err
	}
	_ = f.Close()
	return st, nil
}

// writeAnchorFile creates (or replaces) the anchor file at once with the
// two slots, each sealed under key (nil: unsealed): a temporary file,
// fsync, rename, fsync of the directory (sdk/atomicfile). It is how an anchor is created,
// sealed for the first time, and re-anchored; appends write one slot in
// place (writeSlot).
func writeAnchorFile(path string, key []byte, s0, s1 *anchorBody) error {
	d0, err := s0.encodeSlot(key)
	if err != nil {
		return err
	}
	d1, err := s1.encodeSlot(key)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(d0, d1...), 0o600)
}

// Anchored is what WriteAnchor wrote.
type Anchored struct {
	Head    Head
	KeyID   string // the seal key's key_id; "" when written unsealed
	Witness bool   // the witness in the OS keychain was set to Head
}

// WriteAnchor is the anchor's one writer outside an append (re-anchoring,
// `agentnode audit reanchor`): under the log's write lock (no append or
// rotation in between), it calls check, which must verify the log as it is
// (not taking the read lock: the write lock is held) and return its head
// (0 and Genesis for no records); that head becomes the anchor, both slots
// (sealed when a.Key gives a key), and, when sealed, the witness. Without
// an OS keychain it writes an unsealed anchor, but it refuses to replace a
// sealed one. check's error is returned as it is; the others wrap
// reason.ErrAuditUnavailable.
func WriteAnchor(dir string, a *Anchor, check func() (Head, error)) (*Anchored, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, unavailable("create audit directory: %w", err)
	}
	lk, err := os.OpenFile(filepath.Join(dir, LockName), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, unavailable("open audit lock: %w", err)
	}
	defer lk.Close()
	if err := lockFile(lk, unix.LOCK_EX); err != nil {
		return nil, unavailable("lock audit log: %w", err)
	}
	defer func() { _ = unlockFile(lk) }()
	cdir, err := CanonicalDir(dir)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(a.Path), 0o700)
	}
	if err != nil {
		return nil, unavailable("audit anchor: %w", err)
	}
	last, err := check()
	if err != nil {
		return nil, err
	}
	if !validHead(last) {
		return nil, unavailable("re-anchor: %d/%q is not a head of a chain", last.Seq, last.Hash)
	}
	var key []byte
	kerr := error(keychain.ErrUnavailable)
	if a.Key != nil {
		key, kerr = a.Key("")
	}
	old, oerr := ReadAnchor(a.Path)
	done := &Anchored{Head: last}
	switch {
	case kerr == nil:
		done.KeyID = lockfile.KeyID(key)
	case errors.Is(kerr, keychain.ErrUnavailable):
		if oerr == nil && old.Sealed() {
			return nil, unavailable("the audit anchor %s is sealed and the seal key cannot be read, so it would be replaced by an unsealed one: re-anchor where the OS keychain is available: %w", a.Path, kerr)
		}
		key = nil
	default:
		return nil, unavailable("read the audit seal key: %w", kerr)
	}
	// Both slots name the head; the generations go on from the old file's
	// (when it can be read), so that no slot of it outranks the new ones.
	var gen uint64
	if oerr == nil {
		for _, sl := range old.slots {
			if sl != nil {
				gen = max(gen, sl.Gen)
			}
		}
	}
	s0 := &anchorBody{Gen: gen + 1, Version: anchorVersion, Dir: cdir, Head: last}
	s1 := &anchorBody{Gen: gen + 2, Version: anchorVersion, Dir: cdir, Head: last}
	if err := writeAnchorFile(a.Path, key, s0, s1); err != nil {
		return nil, unavailable("write the audit anchor: %w", err)
	}
	if key != nil && a.Witness != "" {
		if err := SetWitness(a.Witness, cdir, last); err != nil {
			return nil, unavailable("record the audit witness in the OS keychain: %w", err)
		}
		done.Witness = true
	}
	return done, nil
}

// beforeSlotWrite is a no-op; the crash tests replace it, in a child
// process, to tear a slot's write (write part of it, then die). what is
// "intent", "commit" or "repair".
var beforeSlotWrite = func(what string, f *os.File, off int64, slot []byte) {}

// writeSlot writes b into slot i of f in place and makes it durable.
func writeSlot(what string, f *os.File, i int, b *anchorBody, key []byte) error {
	data, err := b.encodeSlot(key)
	if err != nil {
		return err
	}
	off := int64(i) * anchorSlotSize
	beforeSlotWrite(what, f, off, data)
	if _, err := f.WriteAt(data, off); err != nil {
		return err
	}
	return fdatasync(f)
}

// CanonicalDir is the absolute path of dir with symlinks resolved as far as
// it exists: what an anchor and a witness are bound to.
func CanonicalDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real, nil
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return abs, nil
	}
	return filepath.Join(parent, filepath.Base(abs)), nil
}

// witness is the head a log's witness in the keychain holds.
type witness struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

// GetWitness reads the witness of the log in cdir: nil and no error if
// there is none.
func GetWitness(service, cdir string) (*Head, error) {
	s, err := keychain.Get(service, cdir)
	if errors.Is(err, keychain.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var w witness
	if err := json.Unmarshal([]byte(s), &w); err != nil || !validHead(Head(w)) {
		return nil, fmt.Errorf("the audit witness in the OS keychain (service %s) is malformed", service)
	}
	h := Head(w)
	return &h, nil
}

// SetWitness records h as the witness of the log in cdir.
func SetWitness(service, cdir string, h Head) error {
	data, _ := json.Marshal(witness(h))
	return keychain.Set(service, cdir, string(data))
}

// crashPoint is a no-op; the crash tests replace it, in a child process, to
// die at a point of an append ("intent": the intent is durable, the record
// not yet written; "record": the record is durable, the commit not yet).
var crashPoint = func(string) {}

// anchorWrite carries what an append's intent decided to its commit.
type anchorWrite struct {
	f       *os.File // the anchor file, open for writing
	key     []byte   // nil: unsealed
	witness bool     // first sealing of this log: record the witness after the commit
	slot    int      // where the commit goes
	gen     uint64   // the commit's generation
}

func (w *anchorWrite) close() {
	if w != nil && w.f != nil {
		_ = w.f.Close()
		w.f = nil
	}
}

// sealKey returns the anchor's key for an anchor sealed under id ("": the
// key to seal with), cached in the Log once read.
func (l *Log) sealKey(id string) ([]byte, error) {
	if l.key != nil && (id == "" || id == l.keyID) {
		return l.key, nil
	}
	if l.opts.Anchor.Key == nil {
		return nil, keychain.ErrUnavailable
	}
	k, err := l.opts.Anchor.Key(id)
	if err != nil {
		return nil, err
	}
	l.key, l.keyID = k, lockfile.KeyID(k)
	return k, nil
}

// anchorIntent checks that the log ends where its anchor says and seals
// next as the record about to be written. Called with the lock held, before
// the record is written; nothing is written if it fails. The caller closes
// the returned anchorWrite.
func (l *Log) anchorIntent(next Head) (*anchorWrite, error) {
	a := l.opts.Anchor
	cur := Head{l.seq, l.hash}
	f, st, err := openAnchor(a.Path, true)
	switch {
	case errors.Is(err, ErrNoAnchor):
		st = nil
	case err != nil:
		return nil, unavailable("read the audit anchor: %w; run `agentnode audit verify`", err)
	}
	w := &anchorWrite{f: f}
	ok := false
	defer func() {
		if !ok {
			w.close()
		}
	}()
	if st != nil && st.newest().Dir != l.cdir {
		return nil, unavailable("the audit anchor %s belongs to the log in %s, not to %s; run `agentnode audit verify`", a.Path, st.newest().Dir, l.cdir)
	}
	id := ""
	if st != nil {
		id = st.KeyID()
	}
	key, kerr := l.sealKey(id)
	w.key = key
	switch {
	case st != nil && st.Sealed():
		if kerr != nil {
			return nil, unavailable("the audit anchor %s is sealed, but the seal key cannot be read, so the log cannot go on: %w", a.Path, kerr)
		}
		if why := st.CheckSeal(key); why != "" {
			return nil, unavailable("audit anchor %s: %s; run `agentnode audit verify`", a.Path, why)
		}
	case kerr == nil:
		// No anchor yet, or an unsealed one: sealed from now on, unless
		// the keychain remembers that this log was sealed before.
		if a.Witness != "" {
			wh, err := GetWitness(a.Witness, l.cdir)
			if err != nil {
				return nil, unavailable("read the audit witness: %w", err)
			}
			if wh != nil {
				what := "missing"
				if st != nil {
					what = "not sealed"
				}
				return nil, unavailable("the audit anchor %s is %s, but this log was sealed before (the OS keychain holds its witness at seq %d): the anchor was deleted or replaced; run `agentnode audit verify`, and `agentnode audit reanchor` to accept the log as it is",
					a.Path, what, wh.Seq)
			}
			w.witness = true
		}
	case errors.Is(kerr, keychain.ErrUnavailable):
		w.key = nil // no OS keychain: unsealed, as it was
	default:
		return nil, unavailable("read the audit seal key: %w", kerr)
	}
	if st != nil && !st.Matches(cur) {
		e, _ := st.Expect()
		return nil, unavailable("the audit log ends at seq %d (hash %.16s…), but its anchor %s says seq %d (hash %.16s…): the log was changed outside agentnode; run `agentnode audit verify`",
			cur.Seq, cur.Hash, a.Path, e.Seq, e.Hash)
	}
	intent := &anchorBody{Version: anchorVersion, Dir: l.cdir, Head: cur, Pending: &next}
	if st == nil || !st.Sealed() && w.key != nil {
		// A new anchor, or the first seal of an unsealed one: the whole
		// file at once, a commit of the log's end and the intent.
		var gen uint64
		if st != nil {
			gen = st.newest().Gen
		}
		commit := &anchorBody{Gen: gen + 1, Version: anchorVersion, Dir: l.cdir, Head: cur}
		intent.Gen = gen + 2
		w.close()
		if err := writeAnchorFile(a.Path, w.key, commit, intent); err != nil {
			return nil, unavailable("write the audit anchor: %w", err)
		}
		if w.f, err = os.OpenFile(a.Path, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0); err != nil {
			return nil, unavailable("open the audit anchor: %w", err)
		}
		w.slot, w.gen = 0, gen+3
		ok = true
		return w, nil
	}
	gen, slot := st.newest().Gen, 1-st.cur
	if n := st.newest(); !st.Torn() && n.Pending != nil && cur == n.Head {
		// The last append stopped before its record: commit the log's end
		// first, so that the slot before the next intent says exactly that
		// (expect: were this intent torn, the stale one would say the log
		// ends at its pending record).
		gen++
		repair := &anchorBody{Gen: gen, Version: anchorVersion, Dir: l.cdir, Head: cur}
		if err := writeSlot("repair", w.f, slot, repair, w.key); err != nil {
			return nil, unavailable("write the audit anchor: %w", err)
		}
		slot = 1 - slot
	}
	intent.Gen = gen + 1
	if err := writeSlot("intent", w.f, slot, intent, w.key); err != nil {
		return nil, unavailable("write the audit anchor: %w", err)
	}
	w.slot, w.gen = 1-slot, gen+2
	ok = true
	return w, nil
}

// anchorCommit seals h, the record just made durable, as the head.
func (l *Log) anchorCommit(w *anchorWrite, h Head) error {
	a := l.opts.Anchor
	body := &anchorBody{Gen: w.gen, Version: anchorVersion, Dir: l.cdir, Head: h}
	if err := writeSlot("commit", w.f, w.slot, body, w.key); err != nil {
		return unavailable("write the audit anchor (the record of seq %d is written; the anchor names it as pending): %w", h.Seq, err)
	}
	if w.witness {
		if err := SetWitness(a.Witness, l.cdir, h); err != nil {
			return unavailable("record the audit witness in the OS keychain: %w", err)
		}
	}
	return nil
}
