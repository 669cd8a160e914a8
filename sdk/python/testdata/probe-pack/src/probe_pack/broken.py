"""A module whose dependency is not installed."""

import missing_dependency_xyz  # noqa: F401


def run() -> dict:
    return {}
