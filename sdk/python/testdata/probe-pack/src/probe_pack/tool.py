"""Probe tools: sync, async, printing, raising and non-JSON results."""

from __future__ import annotations

import asyncio
import datetime
import math
import os
import subprocess
import sys


def word_count(text: str) -> dict:
    words = text.split()
    return {"words": len(words), "longest": max(words, key=len) if words else None,
            "by_length": {len(w): w for w in words}, "pair": (1, "two")}


async def slow_echo(value, delay: float = 0) -> dict:
    await asyncio.sleep(delay)
    return {"echo": value, "loop": type(asyncio.get_running_loop()).__name__}


def chatty(n: int) -> dict:
    for i in range(n):
        print("print line", i)
    sys.stdout.write("sys.stdout.write\n")
    sys.__stdout__.write("sys.__stdout__.write\n")
    sys.__stdout__.flush()
    os.write(1, b"os.write(1)\n")
    subprocess.run([sys.executable, "-c", "print('child process stdout')"], check=True)
    return {"printed": n}


def explode(message: str) -> dict:
    raise ValueError(message)


def stamp() -> datetime.datetime:
    return datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)


def tags() -> dict:
    return {"ids": {3, 1, 2}, "name": "t"}


def not_a_number() -> dict:
    return {"x": math.nan}


def leave(code: int = 3) -> None:
    sys.exit(code)


def run(text: str = "") -> dict:
    """Default entrypoint."""
    return word_count(text)


def import_module(name: str) -> str:
    """Imports the module name: whether it is visible to the package."""
    import importlib

    importlib.import_module(name)
    return name
