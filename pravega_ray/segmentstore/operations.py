"""Operations of the ingestion pipeline and their encoding in durable log records.

*format* A log record (one group commit) is a sequence of operations, each
``[type u8][body length u32][body]``. Append bodies are binary (hot path):
``[offset u64][event_count u32][writer_id 16 bytes][last_event_number i64]
[has_writer u8][name length u16][name utf-8][data]``. Other bodies are compact
JSON (rare, readable in a hex dump).

Every operation carries what recovery needs to re-apply it exactly as it was
applied first: an append carries the offset it was assigned, so replay checks
that the segment's length matches (a mismatch is a bug or corruption).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from pravega_ray.errors import DataCorruptionError


@dataclass(frozen=True, slots=True)
class CreateSegment:
    segment: str
    creation_time_ms: int


@dataclass(frozen=True, slots=True)
class Append:
    segment: str
    offset: int
    data: bytes
    writer_id: bytes | None
    last_event_number: int
    event_count: int


@dataclass(frozen=True, slots=True)
class Seal:
    segment: str
    length: int


@dataclass(frozen=True, slots=True)
class ChunkAdded:
    """Bytes ``[offset, offset + length)`` of a segment are in Tier-2 chunk ``chunk``."""

    segment: str
    chunk: str
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class MetadataCheckpoint:
    """The container's metadata, whole: every segment's lengths, attributes and chunks.

    Written alone in its log record, so the log can be truncated up to it once
    every append before it is in Tier-2; recovery of a truncated log starts
    from it. Each segment is a dict: ``n`` name, ``t`` creation time, ``l``
    length, ``s`` sealed, ``e`` event count, ``a`` attributes (hex key ->
    value), ``sl`` storage length, ``c`` chunks ``[[offset, length, name]]``.
    """

    segments: tuple[dict, ...]  # type: ignore[type-arg]


Operation = CreateSegment | Append | Seal | ChunkAdded | MetadataCheckpoint

_TYPE_CREATE, _TYPE_APPEND, _TYPE_SEAL, _TYPE_CHUNK, _TYPE_CHECKPOINT = 1, 2, 3, 4, 5
_OP_HEADER = struct.Struct(">BI")
_APPEND_HEADER = struct.Struct(">QI16sqBH")
_NO_WRITER = bytes(16)


def encoded_size(op: Operation) -> int:
    """Approximate encoded size, for group commit limits."""
    if isinstance(op, Append):
        return _OP_HEADER.size + _APPEND_HEADER.size + len(op.segment) + len(op.data)
    if isinstance(op, MetadataCheckpoint):
        return 256 * (1 + len(op.segments))
    return 256


def encode(ops: list[Operation]) -> bytes:
    parts: list[bytes] = []
    for op in ops:
        if isinstance(op, Append):
            name = op.segment.encode("utf-8")
            header = _APPEND_HEADER.pack(
                op.offset,
                op.event_count,
                op.writer_id or _NO_WRITER,
                op.last_event_number,
                1 if op.writer_id is not None else 0,
                len(name),
            )
            body_len = len(header) + len(name) + len(op.data)
            parts += (_OP_HEADER.pack(_TYPE_APPEND, body_len), header, name, op.data)
            continue
        if isinstance(op, CreateSegment):
            kind, body = _TYPE_CREATE, {"s": op.segment, "t": op.creation_time_ms}
        elif isinstance(op, Seal):
            kind, body = _TYPE_SEAL, {"s": op.segment, "l": op.length}
        elif isinstance(op, MetadataCheckpoint):
            kind, body = _TYPE_CHECKPOINT, {"segments": list(op.segments)}
        elif isinstance(op, ChunkAdded):
            kind, body = (
                _TYPE_CHUNK,
                {"s": op.segment, "c": op.chunk, "o": op.offset, "l": op.length},
            )
        else:  # pragma: no cover - exhaustive over Operation
            raise TypeError(f"unknown operation {op!r}")
        raw = json.dumps(body, separators=(",", ":")).encode("utf-8")
        parts += (_OP_HEADER.pack(kind, len(raw)), raw)
    return b"".join(parts)


def decode(payload: bytes) -> Iterator[Operation]:
    view = memoryview(payload)
    position = 0
    while position < len(view):
        if len(view) - position < _OP_HEADER.size:
            raise DataCorruptionError("truncated operation header in log record")
        kind, body_len = _OP_HEADER.unpack_from(view, position)
        start = position + _OP_HEADER.size
        end = start + body_len
        if end > len(view):
            raise DataCorruptionError("truncated operation body in log record")
        body = view[start:end]
        position = end
        if kind == _TYPE_APPEND:
            offset, count, writer, last, has_writer, name_len = _APPEND_HEADER.unpack_from(body)
            name_end = _APPEND_HEADER.size + name_len
            yield Append(
                segment=bytes(body[_APPEND_HEADER.size : name_end]).decode("utf-8"),
                offset=offset,
                data=bytes(body[name_end:]),
                writer_id=writer if has_writer else None,
                last_event_number=last,
                event_count=count,
            )
            continue
        fields = json.loads(bytes(body))
        if kind == _TYPE_CREATE:
            yield CreateSegment(fields["s"], fields["t"])
        elif kind == _TYPE_SEAL:
            yield Seal(fields["s"], fields["l"])
        elif kind == _TYPE_CHUNK:
            yield ChunkAdded(fields["s"], fields["c"], fields["o"], fields["l"])
        elif kind == _TYPE_CHECKPOINT:
            yield MetadataCheckpoint(tuple(fields["segments"]))
        else:
            raise DataCorruptionError(f"unknown operation type {kind} in log record")
