package pyimage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/agentnode/agentnode/cmd/agentnode/imagebuild"
	"github.com/agentnode/agentnode/sdk/python"
)

// stdlibDir matches the standard library's directory in the image,
// usr/lib/python3.N.
var stdlibDir = regexp.MustCompile(`^usr/lib/python3\.[0-9]+$`)

// compileScript reads records (name, source) from stdin and writes, for
// each source that compiles, a record (the path of its bytecode, the
// bytecode) to stdout: an unchecked hash-based .pyc (PEP 552) at the place
// importlib.util.cache_from_source names, compiled as py_compile does with
// the image's path as the code's file name. A record is a 4-byte
// big-endian length and that many bytes, twice. A hash-based .pyc holds
// no time (the same sources give the same bytes). Unchecked: the
// interpreter loads it without reading and hashing its source on every
// import (~5 ms of every call's start, 4.5 ms CPU median over 30 starts
// importing asyncio, json, datetime and subprocess). That is sound
// because the bytecode is as much a part of the image as its source: it
// is compiled from that source here, and whatever verifies the image
// before a run (the rootfs tree hash, the layer digests) covers both, so
// neither can change without the other's check failing; and an attacker
// who could change both gains nothing from a source check either.
const compileScript = `import sys, struct, importlib.util, importlib._bootstrap_external as be
def read(f, n):
    b = f.read(n)
    if len(b) != n:
        raise EOFError
    return b
def field(f):
    return read(f, struct.unpack(">I", read(f, 4))[0])
inp, out = sys.stdin.buffer, sys.stdout.buffer
while inp.peek(1):
    name, src = field(inp).decode("utf-8"), field(inp)
    try:
        code = compile(src, name, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        continue  # never importable; compileall skips it too
    pyc = bytes(be._code_to_hash_pyc(code, importlib.util.source_hash(src), checked=False))
    cache = importlib.util.cache_from_source(name).encode("utf-8")
    out.write(struct.pack(">I", len(cache)) + cache + struct.pack(">I", len(pyc)) + pyc)
out.flush()
`

// maxBytecode bounds what the compiler may answer (the standard library's
// bytecode is about the size of its source).
const maxBytecode = 1 << 30

// distPackages is the directory of Debian's packaged Python modules (pip,
// setuptools and wheel in the installer image; nothing in the runtime
// image).
const distPackages = "usr/lib/python3/dist-packages"

// shimDir is the directory of the shims (sdk/python): compiled like the
// standard library, so that the tool shim imported by
// python.ImageCommand's launcher, and the agent shim, load from bytecode.
var shimDir = path.Dir(strings.TrimPrefix(python.ShimPath, "/"))

// compileStdlib returns the bytecode of the standard library's modules
// among files, of the modules in Debian's dist-packages (pip and its
// dependencies in the installer image) and of the shims, compiled by the interpreter of the
// packages they were taken from (the image's own, at
// root/usr/bin/python3.N), so that the image's interpreter does not compile
// every module it imports on every start (it cannot write bytecode: the
// rootfs is read-only and the shim runs with -B). Files without a standard
// library directory (no Python among them) give none. The same sources
// and interpreter give the same bytes: the compiler runs with a fixed hash
// seed (frozenset constants keep their order) and compiles the sources in
// name order.
func compileStdlib(root string, files []imagebuild.File) ([]imagebuild.File, error) {
	var lib string
	for _, f := range files {
		if f.Type == tar.TypeDir && stdlibDir.MatchString(f.Name) {
			if lib != "" {
				return nil, fmt.Errorf("%w: two standard libraries, %s and %s", ErrPackage, lib, f.Name)
			}
			lib = f.Name
		}
	}
	if lib == "" {
		return nil, nil
	}
	dirs := []string{lib, distPackages, shimDir}
	var sources []imagebuild.File
	for _, f := range files {
		if f.Type == tar.TypeReg && path.Ext(f.Name) == ".py" && under(f.Name, dirs) {
			sources = append(sources, f)
		}
	}
	sort.Slice(sources, func(i, j int) bool { return sources[i].Name < sources[j].Name })
	interpreter := filepath.Join(root, "usr", "bin", path.Base(lib))
	work, err := os.MkdirTemp("", "agentnode-pyc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	// -S: no site; -B: nothing written; not -I, which would ignore
	// PYTHONHASHSEED. The environment is only that; the work directory
	// (sys.path[0] for -c) is empty.
	cmd := exec.Command(interpreter, "-S", "-B", "-c", compileScript)
	cmd.Env = []string{"PYTHONHASHSEED=0"}
	cmd.Dir = work
	var in bytes.Buffer
	for _, f := range sources {
		writeField(&in, []byte("/"+f.Name))
		writeField(&in, f.Body)
	}
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("compile the standard library with %s: %w", interpreter, err)
	}
	out, readErr := readCompiled(bufio.NewReader(io.LimitReader(stdout, maxBytecode)), dirs)
	if readErr != nil {
		_ = cmd.Process.Kill()
	}
	if err := cmd.Wait(); err != nil || readErr != nil {
		return nil, fmt.Errorf("compile the standard library with %s: %w", interpreter, errors.Join(readErr, err, errors.New(stderr.String())))
	}
	return out, nil
}

// under reports whether the image path name is below one of dirs.
func under(name string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(name, d+"/") {
			return true
		}
	}
	return false
}

// readCompiled reads the compiler's records: bytecode paths, which must be
// in a __pycache__ directory below one of dirs (the directories of the
// sources).
func readCompiled(r *bufio.Reader, dirs []string) ([]imagebuild.File, error) {
	var out []imagebuild.File
	for {
		if _, err := r.Peek(1); err == io.EOF {
			return out, nil
		}
		name, err := readField(r)
		if err != nil {
			return nil, err
		}
		body, err := readField(r)
		if err != nil {
			return nil, err
		}
		n := string(name)
		if len(n) < 2 || n[0] != '/' || path.Clean(n) != n || path.Base(path.Dir(n)) != "__pycache__" ||
			path.Ext(n) != ".pyc" || !under(n[1:], dirs) {
			return nil, fmt.Errorf("the compiler named %q", n)
		}
		out = append(out, imagebuild.File{Name: n[1:], Type: tar.TypeReg, Mode: 0o644, Body: body})
	}
}

func writeField(w *bytes.Buffer, b []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	w.Write(n[:])
	w.Write(b)
}

func readField(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, fmt.Errorf("compiler output: %w", err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxBytecode {
		return nil, fmt.Errorf("compiler output: a record of %d bytes", size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("compiler output: %w", err)
	}
	return b, nil
}
