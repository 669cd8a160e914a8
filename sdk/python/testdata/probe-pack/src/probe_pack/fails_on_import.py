"""A module that raises while it is imported."""

raise RuntimeError("configuration missing at import time")


def run() -> dict:
    return {}
