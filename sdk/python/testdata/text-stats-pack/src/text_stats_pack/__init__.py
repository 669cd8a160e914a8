"""text-stats-pack: count the words and lines of a text."""

from .tool import run

__all__ = ["run"]
