"""agentnode's Python tool shim: one tool call of an AgentNode Python package.

Run as

    python3 -I -S -B agentnode_tool.py [--package-entrypoint] PACK_DIR ENTRYPOINT

It reads one request {"tool": NAME, "input": {...}} from stdin and writes one
response line to stdout, {"ok": true, "result": ...} or {"ok": false,
"error": "Type: message"} (specs/toolio.md). ENTRYPOINT is "module.path:function",
or "module.path" meaning its function "run"; the function is called as
func(**input), and a coroutine it returns is run to completion with
asyncio.run. With --package-entrypoint, ENTRYPOINT is the package-level one of
a tool that has none of its own, and a function named like the requested tool
is preferred to it (AgentNode's SDK resolves such tools so).

sys.path is the interpreter's standard library, then PACK_DIR/src (when it is
a directory), then PACK_DIR, then PACK_DIR/.deps (when it is a directory; its
.pth files are processed). Nothing of the user's site-packages or PYTHON*
environment is used: -I and -S are required. No bytecode is written.

What the tool prints never reaches the response: the real stdout is moved to a
private descriptor before the package is imported, and descriptor 1 (sys.stdout,
C extensions, child processes) becomes stderr. Python 3.8 or later, standard
library only. specs/python.md describes it.
"""

import os
import sys

# The host refuses a response above 4 MiB (specs/toolio.md); one that is
# larger is reported as the tool's error instead of being cut off.
MAX_RESPONSE = 4 * 1024 * 1024 - 1  # the final newline is the last byte

# A request's input is at most 1 MiB; the rest is room for {"tool": ...}.
MAX_REQUEST = 2 * 1024 * 1024

DEPS_DIR = ".deps"

# SDK fallback for a result JSON cannot represent (agentnode_sdk's
# runtimes/python_runner.py): its repr, cut to 2000 characters.
REPR_LIMIT = 2000


def _describe(exc):
    try:
        return "%s: %s" % (type(exc).__name__, exc)
    except Exception:  # an exception whose str() fails
        return type(exc).__name__


def _encode(payload):
    import json

    return json.dumps(payload, allow_nan=False).encode("ascii")


def _result_body(result):
    try:
        return _encode({"ok": True, "result": result})
    except (TypeError, ValueError, OverflowError, RecursionError):
        # Not JSON (a set, a datetime, an object, NaN, a cycle): the SDK's
        # fallback object instead of a failure.
        return _encode({"ok": True, "result": {
            "__agentnode_fallback_repr__": True,
            "repr": repr(result)[:REPR_LIMIT],
        }})


def _read_request(stdin):
    import json

    data = stdin.read(MAX_REQUEST + 1)
    if len(data) > MAX_REQUEST:
        raise ValueError("request is larger than %d bytes" % MAX_REQUEST)
    req = json.loads(data.decode("utf-8"))
    if not isinstance(req, dict):
        raise ValueError("request is not a JSON object")
    tool, inp = req.get("tool"), req.get("input")
    if not isinstance(tool, str) or not tool:
        raise ValueError("request has no tool name")
    if not isinstance(inp, dict):
        raise ValueError("request input is not a JSON object")
    return tool, inp


def _set_path(pack):
    # Under -I -S sys.path holds only the standard library (the zip, the
    # library directory and lib-dynload).
    paths = [p for p in sys.path if p]
    src = os.path.join(pack, "src")
    if os.path.isdir(src):
        paths.append(src)
    paths.append(pack)
    sys.path[:] = paths
    import site

    # -S leaves out the exit() and quit() builtins some tools call.
    site.setquit()
    deps = os.path.join(pack, DEPS_DIR)
    if os.path.isdir(deps):
        site.addsitedir(deps)


def _parse_entrypoint(ep):
    module, sep, func = ep.rpartition(":")
    if not sep:
        module, func = ep, "run"
    parts = module.split(".")
    if not module or not all(p.isidentifier() for p in parts) or not func.isidentifier():
        raise ValueError("invalid entrypoint %r: want module.path or module.path:function" % ep)
    return module, func


def _load(entrypoint, tool, package_level):
    import importlib

    module_name, func_name = _parse_entrypoint(entrypoint)
    module = importlib.import_module(module_name)
    if package_level:
        func = getattr(module, tool, None)
        if func is not None and callable(func):
            return func
    func = getattr(module, func_name, None)
    if func is None:
        raise ImportError("Function '%s' not found in module '%s'" % (func_name, module_name))
    return func


def _call(func, inp):
    result = func(**inp)
    if hasattr(result, "__await__"):
        import asyncio

        async def wait(aw):
            return await aw

        result = asyncio.run(wait(result))
    return result


def _run(argv, stdin):
    args = argv[1:]
    package_level = False
    if args and args[0] == "--package-entrypoint":
        package_level = True
        args = args[1:]
    if len(args) != 2:
        raise ValueError("usage: agentnode_tool.py [--package-entrypoint] PACK_DIR ENTRYPOINT")
    if not (sys.flags.isolated and sys.flags.no_site):
        raise RuntimeError("agentnode_tool.py must run under python3 -I -S")
    pack, entrypoint = os.path.abspath(args[0]), args[1]
    if not os.path.isdir(pack):
        raise FileNotFoundError("package directory %s does not exist" % pack)
    tool, inp = _read_request(stdin)
    _set_path(pack)
    func = _load(entrypoint, tool, package_level)
    return _result_body(_call(func, inp))


def main():
    sys.dont_write_bytecode = True
    pid = os.getpid()
    # The response's descriptor, kept from the tool: duplicated (not
    # inherited by child processes) before anything of the package runs,
    # and descriptor 1 pointed at stderr for everything else.
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    out = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    stdin = sys.stdin.buffer
    body, err = None, None
    try:
        body = _run(sys.argv, stdin)
    except BaseException as exc:  # the tool's failure, whatever it raised
        err = exc
    if os.getpid() != pid:
        # A child the tool forked came back through here: only the
        # process agentnode started answers.
        os._exit(0)
    if body is None:
        body = _encode({"ok": False, "error": _describe(err)})
    if len(body) > MAX_RESPONSE:
        body = _encode({"ok": False, "error": "ValueError: the response is %d bytes, more than %d" % (
            len(body), MAX_RESPONSE)})
    for stream in (sys.stdout, sys.stderr, sys.__stdout__):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass
    data = memoryview(body + b"\n")
    while data:
        n = os.write(out, data)
        data = data[n:]
    os.close(out)
    # The response is complete: threads or exit handlers the tool left
    # behind do not hold the call open.
    os._exit(0)


if __name__ == "__main__":
    main()
