"""Names: validation of user names, segment ids, qualified segment names, placement hashes.

Segment id: ``epoch << 32 | number`` (as Pravega). A stream segment's qualified
name is ``<scope>/<stream>/<number>.#epoch.<epoch>``. Scope and stream names are
validated here and nowhere else: only ``[A-Za-z0-9_.-]``, at most 255
characters, never ``.`` or ``..``, and no leading ``_`` for user names (``_`` marks
system scopes and streams). Because every path component built from a name has
passed this check, a name can never become a path outside a storage prefix;
storage backends check again on their side.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from pravega_ray.constants import NAME_LENGTH_MAX, SYSTEM_SCOPE
from pravega_ray.errors import InvalidNameError

_NAME_RE = re.compile(r"[A-Za-z0-9_.\-]+")
_SEGMENT_RE = re.compile(
    r"(?P<scope>[A-Za-z0-9_.\-]+)/(?P<stream>[A-Za-z0-9_.\-]+)/"
    r"(?P<number>\d+)\.#epoch\.(?P<epoch>\d+)"
)
# Derived segments: a transaction or transient segment of a stream segment.
_DERIVED_RE = re.compile(r"#(?P<kind>transaction|transient)\.(?P<id>[0-9a-f]{32})")


def validate_name(kind: str, name: object, *, allow_system: bool = False) -> str:
    """Return ``name`` if it is a valid scope/stream/reader-group name, else raise.

    Raises :class:`InvalidNameError` naming ``kind`` and the reason.
    """
    if not isinstance(name, str):
        raise InvalidNameError(f"{kind} name must be a str, got {type(name).__name__}")
    if not name:
        raise InvalidNameError(f"{kind} name must not be empty")
    if len(name) > NAME_LENGTH_MAX:
        raise InvalidNameError(f"{kind} name longer than {NAME_LENGTH_MAX} characters")
    if not _NAME_RE.fullmatch(name):
        raise InvalidNameError(
            f"{kind} name {name!r} may only contain letters, digits, '_', '.' and '-'"
        )
    if set(name) == {"."}:
        raise InvalidNameError(f"{kind} name {name!r} is not allowed")
    if name.startswith("_") and not allow_system:
        raise InvalidNameError(f"{kind} name {name!r}: a leading '_' is reserved for the system")
    return name


def validate_stream_name(scope: object, stream: object) -> tuple[str, str]:
    """Return ``(scope, stream)`` if both are valid user names, the scope checked first.

    Every call that names a user's stream checks its names here before it asks whether
    they exist: a leading ``_`` is the system's (``_system``, a key-value table's
    ``_kvt.<table>`` stream), so no stream call reaches a system stream.
    """
    return validate_name("scope", scope), validate_name("stream", stream)


def parse_scoped_stream(scoped: object) -> tuple[str, str]:
    """Split ``"scope/stream"`` and validate both parts."""
    if not isinstance(scoped, str) or scoped.count("/") != 1:
        raise InvalidNameError(f"expected 'scope/stream', got {scoped!r}")
    scope, stream = scoped.split("/")
    return validate_stream_name(scope, stream)


def segment_id(epoch: int, number: int) -> int:
    """The 64-bit segment id: creation epoch in the high half, segment number in the low."""
    if not (0 <= epoch < 2**31 and 0 <= number < 2**32):
        raise ValueError(f"segment epoch {epoch} / number {number} out of range")
    return (epoch << 32) | number


def segment_epoch(sid: int) -> int:
    return sid >> 32


def segment_number(sid: int) -> int:
    return sid & 0xFFFFFFFF


def stream_segment_name(scope: str, stream: str, sid: int) -> str:
    """Qualified segment name, e.g. ``iot/sensors/2.#epoch.0``."""
    return f"{scope}/{stream}/{segment_number(sid)}.#epoch.{segment_epoch(sid)}"


@dataclass(frozen=True, slots=True)
class SegmentName:
    scope: str
    stream: str
    segment_id: int

    @property
    def qualified(self) -> str:
        return stream_segment_name(self.scope, self.stream, self.segment_id)


KVT_STREAM_PREFIX = "_kvt."
"""A key-value table's segments live in the system stream ``<scope>/_kvt.<table>``."""

KVT_NAME_LENGTH_MAX = NAME_LENGTH_MAX - len(KVT_STREAM_PREFIX)


def validate_kvt_name(name: object) -> str:
    """Return ``name`` if it is a valid key-value table name (a stream name, 250 chars max)."""
    validate_name("key-value table", name)
    assert isinstance(name, str)
    if len(name) > KVT_NAME_LENGTH_MAX:
        raise InvalidNameError(f"key-value table name longer than {KVT_NAME_LENGTH_MAX} characters")
    return name


def kvt_segment_name(scope: str, table: str, partition: int, number_base: int = 0) -> str:
    """The table segment of partition ``partition`` of key-value table ``scope/table``.

    ``number_base`` is where this incarnation of the table numbers its segments: a table
    re-created under a deleted one's name starts after the old one's numbers, so no
    segment name is ever reused (Pravega's safe starting segment number).
    """
    validate_name("scope", scope)
    validate_kvt_name(table)
    return stream_segment_name(
        scope, KVT_STREAM_PREFIX + table, segment_id(0, number_base + partition)
    )


def system_table_segment_name(table: str, partition: int) -> str:
    """The table segment of partition ``partition`` of system table ``table`` in ``_system``.

    Named as a key-value table of the system scope (``_system/_kvt.<table>/<n>.#epoch.0``),
    so placement and name parsing treat it as any other stream segment. ``table`` must be
    a valid key-value table name (no leading ``_``); ``partition`` an int >= 0.
    """
    validate_kvt_name(table)
    if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
        raise InvalidNameError(f"a system table partition is an int >= 0, got {partition!r}")
    return stream_segment_name(SYSTEM_SCOPE, KVT_STREAM_PREFIX + table, segment_id(0, partition))


def parse_segment_name(name: str) -> SegmentName:
    """Parse a qualified stream-segment name; raise InvalidNameError if it is not one."""
    m = _SEGMENT_RE.fullmatch(name) if isinstance(name, str) else None
    if m is None:
        raise InvalidNameError(f"not a stream segment name: {name!r}")
    scope = validate_name("scope", m["scope"], allow_system=True)
    stream = validate_name("stream", m["stream"], allow_system=True)
    return SegmentName(scope, stream, segment_id(int(m["epoch"]), int(m["number"])))


def validate_segment_name(name: object) -> str:
    """Validate any segment name a container is asked to host.

    A qualified stream-segment name, optionally followed by a derived-segment
    suffix ``#transaction.<32 hex>`` or ``#transient.<32 hex>``.
    """
    if not isinstance(name, str):
        raise InvalidNameError(f"segment name must be a str, got {type(name).__name__}")
    m = _SEGMENT_RE.match(name)
    rest = name[m.end() :] if m else None
    if m is None or (rest and not _DERIVED_RE.fullmatch(rest)):
        raise InvalidNameError(f"not a segment name: {name!r}")
    parse_segment_name(m.group(0))
    return name


def transaction_segment_name(parent: str, transaction_id: bytes) -> str:
    """The segment of transaction ``transaction_id`` (16 bytes) on stream segment ``parent``."""
    parse_segment_name(parent)
    return f"{parent}#transaction.{transaction_id.hex()}"


def is_transaction_segment(name: str) -> bool:
    """Whether ``name`` is a transaction segment (``<parent>#transaction.<32 hex>``)."""
    derived = _DERIVED_RE.search(name)
    return derived is not None and derived["kind"] == "transaction"


def transient_segment_name(parent: str, writer_id: bytes) -> str:
    """The name of the transient segment with the 16-byte id ``writer_id`` on ``parent``.

    The container picks a random id for each one (``segmentstore/transient_segments.py``); a
    large event is written there, then merged into ``parent``.
    """
    parse_segment_name(parent)
    return f"{parent}#transient.{writer_id.hex()}"


def parent_segment_name(name: str) -> str:
    """The stream-segment name a (transaction, transient, ...) segment belongs to.

    Placement hashes this, so derived segments land in their parent's container.
    """
    m = _SEGMENT_RE.match(name)
    if m is None:
        raise InvalidNameError(f"not a stream segment name: {name!r}")
    return m.group(0)


def stable_hash64(text: str) -> int:
    """A 64-bit hash that is the same in every process and Python version."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


def container_for_segment(name: str, container_count: int) -> int:
    """The container that owns segment ``name``: stable hash of its parent modulo the count."""
    if container_count <= 0:
        raise ValueError("container_count must be positive")
    return stable_hash64(parent_segment_name(name)) % container_count


def routing_key_hash(routing_key: str) -> float:
    """Map a routing key to a point in the key space [0, 1): the hash of the *legacy* routing
    rule (``records.KeyHash.LEGACY``), which only streams created before streams recorded
    their rule use; newer streams use Pravega's (``wire.routing.pravega_key_hash``).

    Raises UnicodeEncodeError for a key that is not encodable as UTF-8 (a lone surrogate).
    """
    return stable_hash64(routing_key) / 2**64
