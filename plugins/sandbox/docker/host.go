package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// DefaultHost is the Docker Engine endpoint the plugin talks to unless a
// host file says otherwise.
const DefaultHost = "unix:///var/run/docker.sock"

// HostFileSuffix names the host file: the plugin binary's path plus this
// suffix (bin/agentnode-sandbox-docker.docker-host).
const HostFileSuffix = ".docker-host"

// maxHostFile bounds the host file.
const maxHostFile = 4096

// endpoint is the engine endpoint the backend uses and where the choice came
// from (for logs and availability details).
type endpoint struct {
	host   string // unix:///absolute/path
	socket string // the absolute path
	source string // "default" or the host file's path
}

// endpointFor returns the endpoint for the plugin binary at exe: the one
// named in exe+HostFileSuffix when that file exists, else DefaultHost.
//
// Plugins are started with no host environment, so DOCKER_HOST cannot reach
// them; the host file is the one way to point a build at another engine
// (tests use it for a private dockerd). Because the engine socket is
// root-equivalent and decides which daemon enforces the sandbox, the file
// is only honoured when it is a regular file (not a symlink) owned by root
// or by this process's user and not writable by group or others, and it
// may only name a unix socket by absolute path.
func endpointFor(exe string) (endpoint, error) {
	if exe == "" {
		return parseHost(DefaultHost, "default")
	}
	path := exe + HostFileSuffix
	data, err := readHostFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return parseHost(DefaultHost, "default")
	}
	if err != nil {
		return endpoint{}, err
	}
	line, err := hostLine(data)
	if err != nil {
		return endpoint{}, fmt.Errorf("host file %s: %w", path, err)
	}
	ep, err := parseHost(line, path)
	if err != nil {
		return endpoint{}, fmt.Errorf("host file %s: %w", path, err)
	}
	return ep, nil
}

// readHostFile reads the host file after checking who may have written it.
func readHostFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("host file %s: is a symlink: %w", path, err)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("host file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("host file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("host file %s: not a regular file", path)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("host file %s: writable by group or others (mode %v)", path, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if euid := uint32(os.Geteuid()); st.Uid != 0 && st.Uid != euid {
			return nil, fmt.Errorf("host file %s: owned by uid %d, want root or %d", path, st.Uid, euid)
		}
	}
	if fi.Size() > maxHostFile {
		return nil, fmt.Errorf("host file %s: larger than %d bytes", path, maxHostFile)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxHostFile+1))
	if err != nil {
		return nil, fmt.Errorf("host file: %w", err)
	}
	if len(data) > maxHostFile {
		return nil, fmt.Errorf("host file %s: larger than %d bytes", path, maxHostFile)
	}
	return data, nil
}

// hostLine returns the one non-blank, non-comment line of the host file.
func hostLine(data []byte) (string, error) {
	var found []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		found = append(found, l)
	}
	switch len(found) {
	case 0:
		return "", errors.New("names no engine endpoint")
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("names %d endpoints, want one", len(found))
}

// parseHost accepts unix:///absolute/path only: a TCP endpoint without TLS
// would hand the root-equivalent engine API to the network, and TLS would
// need certificates the plugin has no way to be given.
func parseHost(host, source string) (endpoint, error) {
	path, ok := strings.CutPrefix(host, "unix://")
	if !ok {
		return endpoint{}, fmt.Errorf("engine endpoint %q: only unix:///absolute/path is supported", host)
	}
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || strings.ContainsAny(path, "\x00\n") {
		return endpoint{}, fmt.Errorf("engine endpoint %q: the socket must be a clean absolute path", host)
	}
	return endpoint{host: host, socket: path, source: source}, nil
}
