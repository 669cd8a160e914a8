// Package python holds agentnode's Python tool shim, the one program through
// which a `runtime: python` tool of an AgentNode package runs: it speaks the
// tool I/O protocol (specs/toolio.md) on its standard streams and calls the
// package's Python entrypoint with AgentNode's semantics. The shim
// (agentnode_tool.py, Python 3.8+, standard library only) is embedded here so
// that the host executor can write it beside a run and the image builder
// (cmd/agentnode/pyimage) can bake it into the Python runtime image at
// ShimPath. specs/python.md describes both.
package python

import (
	_ "embed"
	"regexp"
)

// Shim is the source of agentnode_tool.py.
//
//go:embed agentnode_tool.py
var Shim []byte

// ShimPath is where the Python runtime image holds the shim.
const ShimPath = "/usr/lib/agentnode/agentnode_tool.py"

// Interpreter is the Python interpreter of the Python runtime image, and the
// one the host uses (Debian's python3; never one found on PATH).
const Interpreter = "/usr/bin/python3"

// DepsDir is the directory inside a package that holds its installed
// dependencies (`pip install --target`); the shim puts it on sys.path after
// the package's own code and processes its .pth files.
const DepsDir = ".deps"

// Command is the argv that runs one call of the tool whose entrypoint is
// entrypoint ("module.path:function", or "module.path" for its run) in the
// package at packDir, with interpreter python and the shim at shim. The
// flags are the isolation the shim requires: -I (no PYTHON* variables, no
// user site-packages, no script directory on sys.path), -S (no
// site-packages of the interpreter: only the package and its DepsDir), -B
// (no bytecode written). packageLevel says entrypoint is the package-level
// entrypoint of a tool without its own, which the SDK resolves by trying a
// function named like the tool first.
func Command(python, shim, packDir, entrypoint string, packageLevel bool) []string {
	argv := []string{python, "-I", "-S", "-B", shim}
	if packageLevel {
		argv = append(argv, "--package-entrypoint")
	}
	return append(argv, packDir, entrypoint)
}

// imageLauncher is the program ImageCommand runs (python3 -c): it imports
// the shim at ShimPath as a module, so that Python loads the bytecode the
// image holds for it (its __pycache__, compiled when the image is built)
// instead of compiling it from source, as it always does for a script
// (~2 ms of every call); then it takes the shim's directory off sys.path
// and the module out of sys.modules, so neither is seen by the package
// (which may have a module of that name), and calls its main, which reads
// its arguments from sys.argv[1:] as the script does.
const imageLauncher = `import sys;sys.path.insert(0,"/usr/lib/agentnode");import agentnode_tool as t;del sys.path[0],sys.modules["agentnode_tool"];t.main()`

// ImageCommand is Command for the Python runtime image, whose shim is at
// ShimPath with its bytecode: the same flags and arguments, the shim
// imported by a launcher (-c) rather than run as a script. Without the
// bytecode Python compiles the shim, as for a script; the call is the same.
func ImageCommand(packDir, entrypoint string, packageLevel bool) []string {
	argv := []string{Interpreter, "-I", "-S", "-B", "-c", imageLauncher}
	if packageLevel {
		argv = append(argv, "--package-entrypoint")
	}
	return append(argv, packDir, entrypoint)
}

// ShimName is the shim's file name, wherever it is written.
const ShimName = "agentnode_tool.py"

// entrypointRe is what the shim accepts as an entrypoint, in ASCII:
// module.path, or module.path:function, each part a Python identifier.
var entrypointRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(:[A-Za-z_][A-Za-z0-9_]*)?$`)

// ValidEntrypoint reports whether ep is an entrypoint the shim can load:
// "module.path" (its run) or "module.path:function", every part an ASCII
// Python identifier. Nothing else reaches the shim's argv.
func ValidEntrypoint(ep string) bool { return entrypointRe.MatchString(ep) }
