"""Test-only entrypoints of the notes digest agent: how the shim answers
agents that fail, overrun their limits or misuse the context."""
from __future__ import annotations

import os
import sys


def raises(context, **kwargs):
    raise LookupError("no notes for %s" % context.goal)


def loops(context, **kwargs):
    while True:
        context.next_iteration()


def forbidden(context, **kwargs):
    return context.run_tool("not-allowed-pack", "anything")


def overrun(context, **kwargs):
    results = []
    while True:
        results.append(context.run_tool("e2e-word-count", "count", text="x").success)


def no_llm(context, **kwargs):
    return context.call_llm_text([{"role": "user", "content": "hi"}])


def refusals(context, **kwargs):
    r = context.run_tool("e2e-word-count", "count", text="x")
    try:
        context.call_llm([{"role": "user", "content": "hi"}])
    except Exception as exc:  # noqa: BLE001 - the probe reports what was raised
        return {"tool": [r.success, r.mode_used, r.error], "llm": [type(exc).__name__, str(exc), exc.code]}
    return {"tool": [r.success, r.mode_used, r.error], "llm": None}


def streams(context, **kwargs):
    # What an agent prints or reads never touches the protocol.
    print("to stdout")
    sys.stdout.write("sys.stdout\n")
    os.write(1, b"fd 1\n")
    got = sys.stdin.read()
    raw = os.read(0, 100)
    return {"stdin": got, "fd0": raw.decode(), "kwargs": kwargs, "goal": context.goal}


def odd_result(context, **kwargs):
    return {"when": {1, 2}}
