"""The ``sessiontree`` command line (SPEC section 6): inspect, navigate, replay and convert sessions."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 error)."""
    from sessiontree.cli.app import run

    return run(argv)


__all__ = ["main"]
