package mcpserve

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// TokenFile is the name, in the agentnode home, of the bearer token of
// `agentnode mcp serve --http`.
const TokenFile = "mcp-http.token"

// ErrTokenUnsafe refuses a token file that others could read or replace:
// not a regular file, a symlink, not owned by this user, or with any
// group/other permission bit. It is refused, not fixed: a token others
// could read is no secret any more (delete the file to get a new one).
var ErrTokenUnsafe = errors.New("token file is not private")

// ErrTokenInvalid refuses a token file whose content is not a token.
var ErrTokenInvalid = errors.New("token file does not hold a token")

// minTokenLen is the shortest token accepted from the file (a generated
// one is 43 characters: 32 random bytes, base64url).
const minTokenLen = 32

// TokenPath is the token file of the home dir.
func TokenPath(dir string) string { return filepath.Join(dir, TokenFile) }

// Token returns the bearer token stored in the home dir, creating it (32
// bytes from crypto/rand, base64url, mode 0600) if there is none.
func Token(dir string) (string, error) {
	path := TokenPath(dir)
	tok, err := readToken(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("mcp token: %w", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("mcp token: %w", err)
	}
	tmp, err := os.CreateTemp(dir, TokenFile+".*")
	if err != nil {
		return "", fmt.Errorf("mcp token: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(base64.RawURLEncoding.EncodeToString(b[:]) + "\n")
	serr := tmp.Sync()
	if cerr := tmp.Close(); werr == nil && serr == nil {
		werr = cerr
	} else if werr == nil {
		werr = serr
	}
	if werr != nil {
		return "", fmt.Errorf("mcp token: %w", werr)
	}
	// CreateTemp made it 0600. Link, unlike rename, never replaces: when
	// two servers start at once, both use the first token written.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("mcp token: %w", err)
	}
	return readToken(path)
}

// readToken reads and checks the token file without following a symlink.
func readToken(path string) (string, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return "", fmt.Errorf("%s: %w: a symlink", path, ErrTokenUnsafe)
		}
		return "", fmt.Errorf("mcp token: %w", &fs.PathError{Op: "open", Path: path, Err: err})
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("mcp token: %w", err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("%s: %w: not a regular file", path, ErrTokenUnsafe)
	case st == nil || int(st.Uid) != os.Geteuid():
		return "", fmt.Errorf("%s: %w: owned by another user (delete it; a new one is made at the next start)", path, ErrTokenUnsafe)
	case fi.Mode().Perm()&0o077 != 0:
		return "", fmt.Errorf("%s: %w: mode %04o, want 0600 (others may have read it: delete it; a new one is made at the next start)",
			path, ErrTokenUnsafe, fi.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("mcp token: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if len(tok) < minTokenLen || len(tok) > 1024 || strings.TrimLeft(tok, tokenChars) != "" {
		return "", fmt.Errorf("%s: %w (want at least %d characters of [A-Za-z0-9._~+/=-])", path, ErrTokenInvalid, minTokenLen)
	}
	return tok, nil
}

// tokenChars are the characters of an RFC 6750 bearer token (b64token).
const tokenChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/="
