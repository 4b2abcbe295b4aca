"""Ray Data connectors: streams as ``ray.data.Dataset`` and datasets into streams.

:func:`read_stream` is a Ray Data datasource over the batch client's segment ranges
between two stream cuts (one read task per range, Arrow blocks with the columns of
Pravega's Spark connector). See ``docs/pipelines.md``.
"""

from __future__ import annotations

from pravega_ray.data.datasource import StreamDatasource, read_stream

__all__ = ["StreamDatasource", "read_stream"]
