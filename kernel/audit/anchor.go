package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/agentnode/agentnode/kernel/keychain"
	"github.com/agentnode/agentnode/kernel/lock"
)

// The anchor: the head of the chain (seq and hash of the newest record),
// kept in a small file outside the log and sealed with the lockfile's keyed
// seal (lock.MAC, HMAC-SHA256 under the seal key in the OS keychain), so
// that cutting off, rewriting or extending the log, or emptying or deleting
// it, no longer goes unseen (specs/audit.md, "The anchor").
//
// Append writes the anchor twice around each record: before the record, an
// intent naming the record about to be written (pending: its seq and
// hash); after the record is durable, the commit naming it as the head.
// After a crash between the two, the log may end at the head or at the
// pending record, and nothing else: no slack is left for an attacker once
// an append has finished.

// Anchor says where the head of a log is sealed and with which key.
type Anchor struct {
	// Path is the anchor file (home.AuditAnchorPath).
	Path string
	// Key returns the seal key. An error wrapping keychain.ErrUnavailable
	// means there is no OS keychain: the anchor is then written unsealed,
	// unless it was sealed before. Any other error refuses the append.
	Key func() ([]byte, error)
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
	anchorVersion  = 1
	anchorLabel    = "agentnode audit anchor v1\n" // the MAC input starts with it
	maxAnchorBytes = 4096
)

// HomeAnchor is the anchor of a home's audit log: the file path, the
// lockfile seal key (created in the keychain if there is none, read once
// per process) and the witness in the keychain.
func HomeAnchor(path string) *Anchor {
	return &Anchor{Path: path, Key: SealKey, Witness: WitnessService}
}

var keyCache struct {
	mu  sync.Mutex
	key []byte
}

// SealKey is lock.LoadOrCreateKey read once per process: the key stays in
// memory and is never written anywhere but the keychain. Failures are not
// cached.
func SealKey() ([]byte, error) {
	keyCache.mu.Lock()
	defer keyCache.mu.Unlock()
	if keyCache.key == nil {
		k, err := lock.LoadOrCreateKey()
		if err != nil {
			return nil, err
		}
		keyCache.key = k
	}
	return bytes.Clone(keyCache.key), nil
}

// head is a position in the chain: a record's seq and hash (0 and Genesis
// before the first record).
type head struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

// anchorBody is what the seal covers.
type anchorBody struct {
	Version int    `json:"version"`
	Dir     string `json:"dir"` // the log's directory (canonical): the anchor is bound to it
	Head    head   `json:"head"`
	Pending *head  `json:"pending,omitempty"` // the record an unfinished append was writing
}

type anchorSeal struct {
	Algorithm string `json:"algorithm"`
	KeyID     string `json:"key_id"`
	MAC       string `json:"mac"`
}

type anchorFile struct {
	anchorBody
	Seal *anchorSeal `json:"seal"` // null: unsealed (written without a keychain)
}

func (b *anchorBody) macInput() []byte {
	data, _ := json.Marshal(b) // a struct of strings and integers: cannot fail
	return append([]byte(anchorLabel), data...)
}

func (b *anchorBody) encode(key []byte) []byte {
	f := anchorFile{anchorBody: *b}
	if key != nil {
		f.Seal = &anchorSeal{Algorithm: lock.AlgorithmSeal, KeyID: lock.KeyID(key), MAC: lock.MAC(key, b.macInput())}
	}
	data, _ := json.Marshal(&f)
	return append(data, '\n')
}

// errNoAnchor: the anchor file does not exist.
var errNoAnchor = errors.New("no anchor")

// readAnchor reads and checks the form of the anchor file, not its seal.
func readAnchor(path string) (*anchorFile, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoAnchor
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxAnchorBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxAnchorBytes {
		return nil, fmt.Errorf("anchor %s is larger than %d bytes", path, maxAnchorBytes)
	}
	var a anchorFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("anchor %s is not an anchor: %w", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("anchor %s has data after the anchor", path)
	}
	ok := a.Version == anchorVersion && a.Dir != "" && validHead(a.Head) && (a.Pending == nil || validHead(*a.Pending) && a.Pending.Seq == a.Head.Seq+1)
	if s := a.Seal; s != nil {
		ok = ok && s.Algorithm == lock.AlgorithmSeal && len(s.MAC) == 64 && isHex([]byte(s.MAC), false) && s.KeyID != ""
	}
	if !ok {
		return nil, fmt.Errorf("anchor %s is malformed (version, dir, head, pending or seal)", path)
	}
	return &a, nil
}

func validHead(h head) bool {
	return len(h.Hash) == 64 && isHex([]byte(h.Hash), false) && (h.Seq > 0 || h.Hash == Genesis)
}

// checkSeal checks a's seal under key: "" if it holds, else why not.
func (a *anchorFile) checkSeal(key []byte) string {
	if id := lock.KeyID(key); a.Seal.KeyID != id {
		return fmt.Sprintf("the anchor was sealed with another key (key_id %s), not this machine's (key_id %s)", a.Seal.KeyID, id)
	}
	if !lock.MACEqual(a.Seal.MAC, lock.MAC(key, a.macInput())) {
		return "the anchor's seal does not match its content: it was changed after it was sealed"
	}
	return ""
}

// matches reports whether the log ending at h is what a allows: its head,
// or the record its unfinished append was writing.
func (a *anchorBody) matches(h head) bool {
	return h == a.Head || (a.Pending != nil && h == *a.Pending)
}

// canonicalDir is the absolute path of dir with symlinks resolved as far as
// it exists: what an anchor and a witness are bound to.
func canonicalDir(dir string) (string, error) {
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

// getWitness reads the witness of the log in cdir: nil and no error if
// there is none.
func getWitness(service, cdir string) (*head, error) {
	s, err := keychain.Get(service, cdir)
	if errors.Is(err, keychain.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var w witness
	if err := json.Unmarshal([]byte(s), &w); err != nil || !validHead(head(w)) {
		return nil, fmt.Errorf("the audit witness in the OS keychain (service %s) is malformed", service)
	}
	h := head(w)
	return &h, nil
}

func setWitness(service, cdir string, h head) error {
	data, _ := json.Marshal(witness(h))
	return keychain.Set(service, cdir, string(data))
}

// crashPoint is a no-op; the crash tests replace it, in a child process, to
// die at a point of an append ("intent": the intent is durable, the record
// not yet written; "record": the record is durable, the commit not yet).
var crashPoint = func(string) {}

// anchorWrite carries what an append's intent decided to its commit.
type anchorWrite struct {
	key     []byte // nil: unsealed
	witness bool   // first sealing of this log: record the witness after the commit
}

// sealKey returns the anchor's key, cached in the Log once read.
func (l *Log) sealKey() ([]byte, error) {
	if l.key != nil {
		return l.key, nil
	}
	if l.opts.Anchor.Key == nil {
		return nil, keychain.ErrUnavailable
	}
	k, err := l.opts.Anchor.Key()
	if err != nil {
		return nil, err
	}
	l.key = k
	return k, nil
}

// anchorIntent checks that the log ends where its anchor says and seals
// next as the record about to be written. Called with the lock held, before
// the record is written; nothing is written if it fails.
func (l *Log) anchorIntent(next head) (*anchorWrite, error) {
	a := l.opts.Anchor
	cur := head{l.seq, l.hash}
	af, err := readAnchor(a.Path)
	switch {
	case errors.Is(err, errNoAnchor):
		af = nil
	case err != nil:
		return nil, unavailable("read the audit anchor: %w; run `agentnode audit verify`", err)
	case af.Dir != l.cdir:
		return nil, unavailable("the audit anchor %s belongs to the log in %s, not to %s; run `agentnode audit verify`", a.Path, af.Dir, l.cdir)
	}
	key, kerr := l.sealKey()
	w := &anchorWrite{key: key}
	switch {
	case af != nil && af.Seal != nil:
		if kerr != nil {
			return nil, unavailable("the audit anchor %s is sealed, but the seal key cannot be read, so the log cannot go on: %w", a.Path, kerr)
		}
		if why := af.checkSeal(key); why != "" {
			return nil, unavailable("audit anchor %s: %s; run `agentnode audit verify`", a.Path, why)
		}
	case kerr == nil:
		// No anchor yet, or an unsealed one: sealed from now on, unless
		// the keychain remembers that this log was sealed before.
		if a.Witness != "" {
			wh, err := getWitness(a.Witness, l.cdir)
			if err != nil {
				return nil, unavailable("read the audit witness: %w", err)
			}
			if wh != nil {
				what := "missing"
				if af != nil {
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
	if af != nil && !af.matches(cur) {
		return nil, unavailable("the audit log ends at seq %d (hash %.16s…), but its anchor %s says seq %d (hash %.16s…): the log was changed outside agentnode; run `agentnode audit verify`",
			cur.Seq, cur.Hash, a.Path, af.Head.Seq, af.Head.Hash)
	}
	body := anchorBody{Version: anchorVersion, Dir: l.cdir, Head: cur, Pending: &next}
	if err := lock.WriteFileAtomic(a.Path, body.encode(w.key), 0o600); err != nil {
		return nil, unavailable("write the audit anchor: %w", err)
	}
	return w, nil
}

// anchorCommit seals h, the record just made durable, as the head.
func (l *Log) anchorCommit(w *anchorWrite, h head) error {
	a := l.opts.Anchor
	body := anchorBody{Version: anchorVersion, Dir: l.cdir, Head: h}
	if err := lock.WriteFileAtomic(a.Path, body.encode(w.key), 0o600); err != nil {
		return unavailable("write the audit anchor (the record of seq %d is written; the anchor names it as pending): %w", h.Seq, err)
	}
	if w.witness {
		if err := setWitness(a.Witness, l.cdir, h); err != nil {
			return unavailable("record the audit witness in the OS keychain: %w", err)
		}
	}
	return nil
}
