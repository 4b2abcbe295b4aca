"""Operations of the ingestion pipeline and their encoding in durable log records.

*format* A log record (one group commit) is a sequence of operations, each
``[type u8][body length u32][body]``. Append bodies are binary (hot path):
``[offset u64][event_count u32][attribute count u16][name length u16]
[(key 16 bytes, value i64) * count][name utf-8][data]``. Other bodies are
compact JSON (rare, readable in a hex dump).

Every operation carries what recovery needs to re-apply it exactly as it was
applied first: an append carries the offset it was assigned, so replay checks
that the segment's length matches (a mismatch is a bug or corruption).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pravega_ray.errors import DataCorruptionError


@dataclass(frozen=True, slots=True)
class CreateSegment:
    """A new segment. ``incarnation`` tells it from earlier segments of the same name in its
    Tier-2 names (None for segments created before data format 5)."""

    segment: str
    creation_time_ms: int
    role: str = "normal"
    incarnation: str | None = None


@dataclass(frozen=True, slots=True)
class Append:
    """Data at ``offset``, with the attribute values it sets atomically (e.g. writer id ->
    last event number) and the number of events it holds (accumulated into EVENT_COUNT)."""

    segment: str
    offset: int
    data: bytes
    attributes: tuple[tuple[bytes, int], ...]
    event_count: int


@dataclass(frozen=True, slots=True)
class UpdateAttributes:
    segment: str
    attributes: tuple[tuple[bytes, int], ...]


@dataclass(frozen=True, slots=True)
class TruncateSegment:
    """Bytes below ``offset`` are gone; their Tier-2 chunks may be deleted."""

    segment: str
    offset: int


@dataclass(frozen=True, slots=True)
class DeleteSegment:
    segment: str


@dataclass(frozen=True, slots=True)
class MergeSegment:
    """Sealed ``source`` becomes bytes ``[offset, offset + length)`` of ``target``; source is gone.

    ``data`` is None for a metadata-only merge (both segments wholly in Tier-2:
    the source's chunks join the target's chunk list); otherwise it carries
    the source's bytes, which the target then holds like an append. ``attributes``
    are values set on the target atomically with the merge (a large event's writer
    mark); records written before they existed decode with none (key ``a`` absent).
    """

    target: str
    source: str
    offset: int
    length: int
    data: bytes | None
    attributes: tuple[tuple[bytes, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Seal:
    segment: str
    length: int


@dataclass(frozen=True, slots=True)
class ChunkAdded:
    """Bytes ``[offset, offset + length)`` of a segment are in Tier-2 chunk ``chunk``.

    ``crc`` is the CRC-32 of the chunk's bytes, checked on every read of it (None for
    chunks written before data format 4, which are checked by length only).
    """

    segment: str
    chunk: str
    offset: int
    length: int
    crc: int | None = None


@dataclass(frozen=True, slots=True)
class AttributeIndexUpdated:
    """The segment's attribute index durably holds a state whose root (footer) is at ``root``.

    Recovery tells the index the highest such root, so an index whose newest state is
    older (its last chunks lost or cut short) is DataCorruptionError, not a silent
    rollback of the segment's attributes (Pravega keeps the same pointer as a core
    attribute, ``ATTRIBUTE_SEGMENT_ROOT_POINTER``).
    """

    segment: str
    root: int


@dataclass(frozen=True, slots=True)
class MetadataCheckpoint:
    """The container's metadata, whole: every segment's lengths, attributes and chunks.

    Written alone in its log record, so the log can be truncated up to it once
    every append before it is in Tier-2; recovery of a truncated log starts
    from it. Each segment is a dict: ``n`` name, ``t`` creation time, ``l``
    length, ``s`` sealed, ``e`` event count, ``a`` attributes (hex key ->
    value), ``sl`` storage length, ``c`` chunks ``[[offset, length, name, crc]]``
    (``crc`` null or absent for chunks written before data format 4), ``ar`` the
    attribute index's recorded root (absent or -1: none recorded).
    """

    segments: tuple[dict[str, Any], ...]


Operation = (
    CreateSegment
    | Append
    | Seal
    | ChunkAdded
    | MetadataCheckpoint
    | UpdateAttributes
    | TruncateSegment
    | DeleteSegment
    | MergeSegment
    | AttributeIndexUpdated
)

_TYPE_CREATE, _TYPE_APPEND, _TYPE_SEAL, _TYPE_CHUNK, _TYPE_CHECKPOINT = 1, 2, 3, 4, 5
_TYPE_ATTRIBUTES, _TYPE_TRUNCATE, _TYPE_DELETE, _TYPE_MERGE = 6, 7, 8, 9
_TYPE_INDEX_ROOT = 10
_JSON_LENGTH = struct.Struct(">I")
_OP_HEADER = struct.Struct(">BI")
_APPEND_HEADER = struct.Struct(">QIHH")
_ATTRIBUTE = struct.Struct(">16sq")


def encoded_size(op: Operation) -> int:
    """Approximate encoded size, for group commit limits."""
    if isinstance(op, Append):
        return (
            _OP_HEADER.size
            + _APPEND_HEADER.size
            + len(op.segment)
            + len(op.data)
            + _ATTRIBUTE.size * len(op.attributes)
        )
    if isinstance(op, MetadataCheckpoint):
        return 256 * (1 + len(op.segments))
    if isinstance(op, MergeSegment) and op.data is not None:
        return 256 + len(op.data)
    return 256


def encode(ops: list[Operation]) -> bytes:
    parts: list[bytes] = []
    for op in ops:
        if isinstance(op, Append):
            name = op.segment.encode("utf-8")
            header = _APPEND_HEADER.pack(op.offset, op.event_count, len(op.attributes), len(name))
            attributes = b"".join(_ATTRIBUTE.pack(k, v) for k, v in op.attributes)
            body_len = len(header) + len(attributes) + len(name) + len(op.data)
            parts += (_OP_HEADER.pack(_TYPE_APPEND, body_len), header, attributes, name, op.data)
            continue
        if isinstance(op, MergeSegment):
            head = {
                "t": op.target,
                "s": op.source,
                "o": op.offset,
                "l": op.length,
                "d": op.data is not None,
            }
            if op.attributes:
                head["a"] = [[k.hex(), v] for k, v in op.attributes]
            raw = json.dumps(head, separators=(",", ":")).encode("utf-8")
            data = op.data or b""
            body_len = _JSON_LENGTH.size + len(raw) + len(data)
            parts += (
                _OP_HEADER.pack(_TYPE_MERGE, body_len),
                _JSON_LENGTH.pack(len(raw)),
                raw,
                data,
            )
            continue
        if isinstance(op, CreateSegment):
            kind, body = _TYPE_CREATE, {"s": op.segment, "t": op.creation_time_ms, "r": op.role}
            if op.incarnation is not None:
                body["i"] = op.incarnation
        elif isinstance(op, Seal):
            kind, body = _TYPE_SEAL, {"s": op.segment, "l": op.length}
        elif isinstance(op, MetadataCheckpoint):
            kind, body = _TYPE_CHECKPOINT, {"segments": list(op.segments)}
        elif isinstance(op, UpdateAttributes):
            kind, body = (
                _TYPE_ATTRIBUTES,
                {"s": op.segment, "a": [[k.hex(), v] for k, v in op.attributes]},
            )
        elif isinstance(op, TruncateSegment):
            kind, body = _TYPE_TRUNCATE, {"s": op.segment, "o": op.offset}
        elif isinstance(op, DeleteSegment):
            kind, body = _TYPE_DELETE, {"s": op.segment}
        elif isinstance(op, AttributeIndexUpdated):
            kind, body = _TYPE_INDEX_ROOT, {"s": op.segment, "r": op.root}
        elif isinstance(op, ChunkAdded):
            kind, body = (
                _TYPE_CHUNK,
                {"s": op.segment, "c": op.chunk, "o": op.offset, "l": op.length, "k": op.crc},
            )
        else:  # pragma: no cover - exhaustive over Operation
            raise TypeError(f"unknown operation {op!r}")
        raw = json.dumps(body, separators=(",", ":")).encode("utf-8")
        parts += (_OP_HEADER.pack(kind, len(raw)), raw)
    return b"".join(parts)


def decode(payload: bytes) -> Iterator[Operation]:
    """The operations of one log record; DataCorruptionError if it is not well formed."""
    try:
        yield from _decode(payload)
    except (struct.error, ValueError, KeyError, UnicodeDecodeError) as e:
        raise DataCorruptionError(f"malformed log record: {e}") from e


def _decode(payload: bytes) -> Iterator[Operation]:
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
            offset, count, attribute_count, name_len = _APPEND_HEADER.unpack_from(body)
            at = _APPEND_HEADER.size
            attributes = tuple(
                _ATTRIBUTE.unpack_from(body, at + i * _ATTRIBUTE.size)
                for i in range(attribute_count)
            )
            at += attribute_count * _ATTRIBUTE.size
            yield Append(
                segment=bytes(body[at : at + name_len]).decode("utf-8"),
                offset=offset,
                data=bytes(body[at + name_len :]),
                attributes=attributes,
                event_count=count,
            )
            continue
        if kind == _TYPE_MERGE:
            (json_len,) = _JSON_LENGTH.unpack_from(body)
            head = json.loads(bytes(body[_JSON_LENGTH.size : _JSON_LENGTH.size + json_len]))
            data = bytes(body[_JSON_LENGTH.size + json_len :]) if head["d"] else None
            attributes = tuple((bytes.fromhex(k), v) for k, v in head.get("a", ()))
            yield MergeSegment(head["t"], head["s"], head["o"], head["l"], data, attributes)
            continue
        fields = json.loads(bytes(body))
        if kind == _TYPE_CREATE:
            role, incarnation = fields.get("r", "normal"), fields.get("i")
            yield CreateSegment(fields["s"], fields["t"], role, incarnation)
        elif kind == _TYPE_SEAL:
            yield Seal(fields["s"], fields["l"])
        elif kind == _TYPE_CHUNK:
            yield ChunkAdded(fields["s"], fields["c"], fields["o"], fields["l"], fields.get("k"))
        elif kind == _TYPE_CHECKPOINT:
            yield MetadataCheckpoint(tuple(fields["segments"]))
        elif kind == _TYPE_ATTRIBUTES:
            yield UpdateAttributes(
                fields["s"], tuple((bytes.fromhex(k), v) for k, v in fields["a"])
            )
        elif kind == _TYPE_TRUNCATE:
            yield TruncateSegment(fields["s"], fields["o"])
        elif kind == _TYPE_DELETE:
            yield DeleteSegment(fields["s"])
        elif kind == _TYPE_INDEX_ROOT:
            yield AttributeIndexUpdated(fields["s"], fields["r"])
        else:
            raise DataCorruptionError(f"unknown operation type {kind} in log record")
