"""Holding an implementation to a service Protocol: the shape of a signature, public methods.

``ray.remote(cls)`` rewrites an actor class's methods in place, adding a keyword-only
``_ray_trace_ctx`` parameter (Ray's tracing), so once any test has started an actor, its
class's signatures carry it. Parameters Ray adds (named ``_ray_*``) are left out of a shape.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def signature_shape(function: Callable[..., Any]) -> tuple[object, ...]:
    """Parameters (name, kind, default, annotation) and the return annotation."""
    signature = inspect.signature(function)
    return (
        [
            (p.name, p.kind, p.default, p.annotation)
            for p in signature.parameters.values()
            if not p.name.startswith("_ray_")
        ],
        signature.return_annotation,
    )


def public_methods(cls: type) -> set[str]:
    """Names of the functions ``cls`` and its own bases (not ``object``) define, leaving out
    private ones."""
    return {
        name
        for klass in cls.__mro__[:-1]
        for name, member in vars(klass).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }
