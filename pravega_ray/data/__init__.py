"""Ray Data connectors: streams as ``ray.data.Dataset`` and datasets into streams.

:func:`read_stream` is a Ray Data datasource over the batch client's segment ranges
between two stream cuts (one read task per range, Arrow blocks with the columns of
Pravega's Spark connector). :func:`write_stream` is a Ray Data datasink writing a
dataset into a stream exactly once (one transaction per write task, committed together).
See ``docs/pipelines.md``.
"""

from __future__ import annotations

from pravega_ray.data.datasink import WriteStreamResult, write_stream
from pravega_ray.data.datasource import StreamDatasource, read_stream

__all__ = ["StreamDatasource", "WriteStreamResult", "read_stream", "write_stream"]
