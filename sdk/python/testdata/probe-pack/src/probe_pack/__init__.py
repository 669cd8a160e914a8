"""probe-pack: tools that exercise the Python runtime."""

from .tool import run

__all__ = ["run"]
