"""Text statistics tool."""

from __future__ import annotations

from collections import Counter


def run(text: str, top: int = 3) -> dict:
    """Count words and lines; the most common words first."""
    words = text.lower().split()
    return {
        "words": len(words),
        "lines": len(text.splitlines()),
        "top": Counter(words).most_common(top),
        "unicode": "caf\u00e9 \u2603",
    }
