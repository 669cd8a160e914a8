"""agentnode_route: a pytest plugin that sends a pack's tool calls through agentnode.

A pack's own pytest suite imports its tool functions and calls them, as
AgentNode packs' tests do (``from my_pack.tool import run``; ``run(text=…)``).
Loaded with ``-p agentnode_route``, this plugin replaces each function that a
tool of the pack's manifest names, at the moment its module is imported, with
a proxy. In ``route`` mode the proxy runs ``agentnode run PACKAGE TOOL
--input-file F --json`` and gives back what the tool answered: the result, or
the tool's exception rebuilt from its ``Type: message`` (the type looked up in
the tool's module, then among the builtins; RuntimeError otherwise). A
refusal by agentnode raises ``AgentnodeRefused``. In ``direct`` mode the proxy
calls the function itself. Both modes append the tool's name to a log, one
line per call, so a harness can check that the two runs made the same calls.

Environment:
  AGENTNODE_ROUTE_MODE   route | direct
  AGENTNODE_ROUTE_TOOLS  JSON list of {"tool", "module", "function"}: function
                         null for a tool that uses the package-level entrypoint
                         (the callable named like the tool, else run)
  AGENTNODE_ROUTE_PACK   the package id (route mode)
  AGENTNODE_ROUTE_BIN    the agentnode binary (route mode)
  AGENTNODE_ROUTE_PATH   directories put first on sys.path (the pack's src/
                         or root, its dependencies), os.pathsep-separated
  AGENTNODE_ROUTE_LOG    the call log
"""

import builtins
import functools
import importlib.abc
import inspect
import json
import os
import site
import subprocess
import sys
import tempfile
import threading

_MODE = os.environ.get("AGENTNODE_ROUTE_MODE", "route")
if _MODE not in ("route", "direct"):
    raise RuntimeError("AGENTNODE_ROUTE_MODE must be route or direct, not %r" % _MODE)
_TOOLS = json.loads(os.environ["AGENTNODE_ROUTE_TOOLS"])
_LOG = os.environ["AGENTNODE_ROUTE_LOG"]

_PATH = [p for p in os.environ.get("AGENTNODE_ROUTE_PATH", "").split(os.pathsep) if p]
sys.path[0:0] = _PATH
for _p in _PATH:
    site.addsitedir(_p)  # its .pth files, as the tool shim processes them in .deps

_BY_MODULE = {}
for _t in _TOOLS:
    _BY_MODULE.setdefault(_t["module"], []).append(_t)


_local = threading.local()


class AgentnodeRefused(Exception):
    """agentnode refused the call or could not complete it."""


def _log(tool):
    with open(_LOG, "a", encoding="utf-8") as f:
        f.write(tool + "\n")


def _rebuild(module, error):
    name, sep, message = error.partition(": ")
    if not sep:
        name, message = error, ""
    for where in (module.__dict__, builtins.__dict__):
        typ = where.get(name)
        if isinstance(typ, type) and issubclass(typ, BaseException):
            try:
                return typ(message)
            except Exception:
                break
    return RuntimeError(error)


def _route(module, tool, kwargs):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(kwargs, f)
    try:
        p = subprocess.run(
            [os.environ["AGENTNODE_ROUTE_BIN"], "run", os.environ["AGENTNODE_ROUTE_PACK"], tool,
             "--input-file", f.name, "--json"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if p.stderr:
        sys.stderr.write(p.stderr)
    try:
        res = json.loads(p.stdout)
    except ValueError:
        raise AgentnodeRefused("agentnode run %s exited %d with no JSON: %s" % (tool, p.returncode, p.stderr))
    if res.get("ok") is True:
        return res.get("result")
    if not res.get("ran") or res.get("code"):
        raise AgentnodeRefused("agentnode run %s: %s: %s" % (tool, res.get("code"), res.get("reason") or res.get("error")))
    raise _rebuild(module, res.get("error", ""))


def _proxy(module, tool, fn):
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if getattr(_local, "depth", 0):
            # A tool function calling another one of its module: part of
            # the outer call (routed, it runs inside the tool's process).
            return fn(*args, **kwargs)
        _log(tool)
        if _MODE == "direct":
            _local.depth = 1
            try:
                return fn(*args, **kwargs)
            finally:
                _local.depth = 0
        # AgentNode calls func(**input): positional arguments become the
        # parameters they bind to; a wrong call fails here as it would.
        try:
            params = dict(sig.bind(*args, **kwargs).arguments)
        except TypeError:
            if args:
                raise
            # A call the function refuses (a missing or unexpected
            # argument) goes to the tool as it is: it fails there.
            return _route(module, tool, kwargs)
        for name, param in sig.parameters.items():
            if param.kind is inspect.Parameter.VAR_KEYWORD and name in params:
                params.update(params.pop(name))
            elif param.kind is inspect.Parameter.VAR_POSITIONAL and name in params:
                raise TypeError("%s: *%s cannot be sent as tool input" % (tool, name))
        return _route(module, tool, params)

    call.__agentnode_tool__ = tool
    return call


def _patch(module):
    for t in _BY_MODULE.get(module.__name__, ()):
        fname = t.get("function")
        if not fname:
            # The package-level entrypoint: a callable named like the tool,
            # else run (the tool shim's --package-entrypoint).
            fname = t["tool"] if callable(getattr(module, t["tool"], None)) else "run"
        fn = getattr(module, fname, None)
        if fn is None or getattr(fn, "__agentnode_tool__", None):
            continue
        setattr(module, fname, _proxy(module, t["tool"], fn))


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in _BY_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        exec_module = loader.exec_module

        def patched(module):
            exec_module(module)
            _patch(module)

        loader.exec_module = patched
        return spec


sys.meta_path.insert(0, _Finder())
for _name in list(_BY_MODULE):
    if _name in sys.modules:
        _patch(sys.modules[_name])
