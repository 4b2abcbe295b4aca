"""Assertions that stay on under ``python -O``.

Use :func:`invariant` for internal consistency (a bug if it fails); raise a
typed error from :mod:`pravega_ray.errors` for anything a caller can cause.
"""

from __future__ import annotations


class InvariantViolation(AssertionError):
    """An internal invariant failed: a bug in pravega-ray, never bad input."""


def invariant(condition: object, message: str = "invariant violated") -> None:
    """Raise :class:`InvariantViolation` if ``condition`` is false."""
    if not condition:
        raise InvariantViolation(message)
