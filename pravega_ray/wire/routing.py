"""Pravega's routing-key hash: which point of the key space [0, 1) a routing key maps to.

Contract
--------
``pravega_key_hash(key)`` returns exactly the float that the Rust core of the official Python
client (PyPI ``pravega`` 0.3.8, Rust ``pravega-client-shared`` 0.3.7) computes for ``key`` before
it looks the segment up. The result is a multiple of 2**-52 in ``[0, 1)``. It is a pure
function: no state, no I/O, no cache (caching is the caller's business).

Looking the segment up is not done here. Both clients take the segment with the smallest
``max_key`` that is >= the value (Rust ``StreamSegments::get_segment``, Java
``SegmentCollection.getSegmentForKey``: ``ceilingEntry``), so a value equal to a boundary goes
to the lower segment: in effect a segment owns ``(min_key, max_key]``, and the value 0.0 goes to
the first segment.

The algorithm, as read in the sources below:

1. Encode the key as UTF-16 code units, little-endian (Java's ``String`` chars; a character
   outside the Basic Multilingual Plane becomes a surrogate pair, i.e. two units).
2. Rust only: the code units are written into a buffer of ``len(key.encode("utf-8"))`` units,
   and the whole buffer is hashed. For an ASCII key that is exactly the code units; otherwise
   the buffer ends with ``utf8_length - utf16_length`` zero units (one for each 2-byte UTF-8
   character, two for each 3-byte one, two for each 4-byte one). Java hashes no padding.
3. MurmurHash3 x64-128 of those bytes with seed 1741865571, which is Java's
   ``"EventRouter".hashCode()``; keep ``h1``, the first 64-bit half (Guava's ``HashCode.asLong``
   reads the first 8 little-endian bytes of the digest, which is ``h1``).
4. Turn ``h1`` into a double: the mantissa is ``h1 >> 12`` (the top 52 bits), i.e. the value is
   ``(h1 >> 12) / 2**52``. Rust and Java both build the double ``1.mantissa`` and subtract 1.0,
   which is exact.

Rust and Java agree on every key whose UTF-8 and UTF-16 lengths are equal, i.e. every ASCII key,
including the empty key (MurmurHash3 of zero bytes with the seed). They disagree on every key
with a non-ASCII character, because of the zero padding of step 2 (a quirk of the Rust client:
it sizes the UTF-16 buffer by the UTF-8 byte length, which ``encoding_rs`` requires, and never
truncates it to the number of units written). ``pravega_key_hash`` follows Rust;
``java_key_hash`` gives the Java value. A Python ``str`` holding a lone surrogate cannot reach
the Rust client (the binding refuses to convert it to a Rust ``String``), so
``pravega_key_hash`` raises ``UnicodeEncodeError`` for it; Java hashes the lone unit as is, and
so does ``java_key_hash``.

Checked against the clients themselves (values in tests/unit/wire/test_routing.py): the
``pravega`` 0.3.8 wheel's writer, pointed at a fake controller and segment store, put every test
key exactly where ``pravega_key_hash`` says; Guava's ``murmur3_128`` gave ``java_key_hash``.

Sources (read for semantics; no code copied):

- pravega/pravega-client-rust ``shared/src/lib.rs``: ``StreamSegments::SEED``,
  ``get_segment_for_string``, ``get_segment`` and ``u64_to_f64_fraction``; its ``test_hash``
  gives ``"hello" -> 0.658716230571337``. Tag v0.3.7 and HEAD read the same.
- mhallin/murmurhash3-rs ``src/mmh3_128.rs`` (crate ``murmurhash3`` 0.0.5, the one the Rust
  client uses): ``murmurhash3_x64_128`` returns ``(h1, h2)``, reads blocks little-endian.
- encoding_rs ``mem::convert_str_to_utf16``: the destination must be at least as long as the
  UTF-8 source; returns the number of units written.
- pravega/pravega-client-python ``src/stream_writer.rs``, ``src/transaction.rs``: the routing key
  reaches ``get_segment_for_routing_key`` unchanged (``None`` means a random point instead).
- pravega/pravega ``common/src/main/java/io/pravega/common/hash/HashHelper.java``
  (``seededWith``, ``hashToRange``, ``longToDoubleFraction``: Guava ``murmur3_128(seed)``,
  ``hashUnencodedChars``, ``asLong``) and
  ``client/src/main/java/io/pravega/client/stream/impl/StreamSegments.java``
  (``HashHelper.seededWith("EventRouter")``).
- Austin Appleby's reference ``MurmurHash3_x64_128`` (aappleby/smhasher ``src/MurmurHash3.cpp``).
"""

from __future__ import annotations

import struct

__all__ = [
    "PRAVEGA_ROUTING_KEY_SEED",
    "java_key_hash",
    "long_to_double_fraction",
    "murmur3_x64_128",
    "pravega_key_hash",
]

PRAVEGA_ROUTING_KEY_SEED = 1741865571
"""Seed of the routing-key hash: Java's ``"EventRouter".hashCode()`` (positive, so the same
whether it is sign- or zero-extended to 64 bits)."""

_MASK_64 = 0xFFFF_FFFF_FFFF_FFFF
_C1 = 0x87C3_7B91_1142_53D5
_C2 = 0x4CF5_AD43_2745_937F
_FMIX_1 = 0xFF51_AFD7_ED55_8CCD
_FMIX_2 = 0xC4CE_B9FE_1A85_EC53
_MANTISSA_SCALE = 2.0**-52

# Compiled unpackers of "n little-endian unsigned 64-bit words", by n. Keys are short, so the
# few sizes that occur are kept; a longer input compiles its own.
_UNPACKERS: dict[int, struct.Struct] = {}
_UNPACKERS_MAX = 64


def _murmur3_padded(padded: bytes | bytearray, length: int, seed: int) -> tuple[int, int]:
    """MurmurHash3 x64-128 of the first ``length`` bytes of ``padded``.

    ``padded`` is the input followed by zero bytes up to a multiple of 16 bytes. Zeros after the
    tail leave the tail's ``k1`` and ``k2`` what the reference reads, and mixing a zero ``k1`` or
    ``k2`` changes nothing, so the tail is mixed like a block (without the block's ``h1``/``h2``
    rounds). Intermediate values are masked to 64 bits only where a shift or rotation needs it:
    ``+``, ``*`` and ``^`` commute with reduction modulo 2**64, and a rotation's two halves never
    overlap.
    """
    count = len(padded) >> 3
    unpacker = _UNPACKERS.get(count)
    if unpacker is None:
        unpacker = struct.Struct(f"<{count}Q")
        if len(_UNPACKERS) < _UNPACKERS_MAX:
            _UNPACKERS[count] = unpacker
    words = unpacker.unpack(padded)
    mask = _MASK_64
    c1 = _C1
    c2 = _C2
    h1 = h2 = seed
    full_words = count - 2 if length & 15 else count
    for index in range(0, full_words, 2):
        k1 = (words[index] * c1) & mask
        h1 ^= (((k1 << 31) | (k1 >> 33)) * c2) & mask
        h1 = ((((h1 << 27) | (h1 >> 37)) + h2) * 5 + 0x52DC_E729) & mask
        k2 = (words[index + 1] * c2) & mask
        h2 ^= (((k2 << 33) | (k2 >> 31)) * c1) & mask
        h2 = ((((h2 << 31) | (h2 >> 33)) + h1) * 5 + 0x3849_5AB5) & mask
    if full_words != count:
        k1 = (words[-2] * c1) & mask
        h1 ^= (((k1 << 31) | (k1 >> 33)) * c2) & mask
        k2 = (words[-1] * c2) & mask
        h2 ^= (((k2 << 33) | (k2 >> 31)) * c1) & mask
    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & mask
    h2 = (h2 + h1) & mask
    # fmix64 of both halves.
    h1 ^= h1 >> 33
    h1 = (h1 * _FMIX_1) & mask
    h1 ^= h1 >> 33
    h1 = (h1 * _FMIX_2) & mask
    h1 ^= h1 >> 33
    h2 ^= h2 >> 33
    h2 = (h2 * _FMIX_1) & mask
    h2 ^= h2 >> 33
    h2 = (h2 * _FMIX_2) & mask
    h2 ^= h2 >> 33
    h1 = (h1 + h2) & mask
    return h1, (h2 + h1) & mask


def murmur3_x64_128(data: bytes, seed: int = 0) -> tuple[int, int]:
    """MurmurHash3 x64-128 of ``data``; returns ``(h1, h2)`` as unsigned 64-bit integers.

    This is Austin Appleby's ``MurmurHash3_x64_128`` with both halves of the state starting at
    ``seed``. The 16-byte digest is ``h1`` then ``h2``, each little-endian (the reference
    function's output, Guava's ``HashCode.asBytes``); ``h1`` is what Guava's ``asLong`` and the
    Rust crate ``murmurhash3``'s first tuple element give (Guava as a signed long).

    ``seed`` is an unsigned 64-bit value. The reference takes a 32-bit seed and zero-extends it;
    Guava takes a Java ``int`` and sign-extends it, so a negative Guava seed ``s`` corresponds
    to ``s & 0xFFFF_FFFF_FFFF_FFFF`` here.

    Raises:
        ValueError: ``seed`` is outside ``[0, 2**64)``.
    """
    if not 0 <= seed <= _MASK_64:
        raise ValueError(f"seed must be an unsigned 64-bit integer, got {seed}")
    length = len(data)
    return _murmur3_padded(data + bytes(-length & 15), length, seed)


def long_to_double_fraction(value: int) -> float:
    """The top 52 bits of a 64-bit value as a fraction in ``[0, 1)``: ``(value >> 12) / 2**52``.

    Accepts the value as unsigned (Rust ``u64``) or signed (Java ``long``); both give the same
    result, as Java's arithmetic shift is masked to 52 bits. The result is exact.

    Raises:
        ValueError: ``value`` is outside ``[-2**63, 2**64)``.
    """
    if not -(1 << 63) <= value <= _MASK_64:
        raise ValueError(f"value must fit in 64 bits, got {value}")
    return ((value & _MASK_64) >> 12) * _MANTISSA_SCALE


def pravega_key_hash(routing_key: str) -> float:
    """The point in ``[0, 1)`` the official Rust-core Pravega client maps ``routing_key`` to.

    Equal to Java's ``HashHelper.seededWith("EventRouter").hashToRange(routing_key)`` for an
    ASCII key; different for a key with any non-ASCII character (see the module docstring).

    Raises:
        UnicodeEncodeError: ``routing_key`` holds a lone surrogate, which the Rust client cannot
            receive (it is a ``ValueError``).
    """
    padded: bytes | bytearray
    if routing_key.isascii():
        # UTF-16LE of ASCII is each byte followed by a zero byte; no Rust padding.
        length = 2 * len(routing_key)
        padded = bytearray(length + (-length & 15))
        padded[0:length:2] = routing_key.encode("ascii")
    else:
        units = routing_key.encode("utf-16-le")
        # The Rust buffer has one u16 per UTF-8 byte; the units written fill its start.
        length = 2 * len(routing_key.encode("utf-8"))
        padded = units + bytes(length - len(units) + (-length & 15))
    h1, _ = _murmur3_padded(padded, length, PRAVEGA_ROUTING_KEY_SEED)
    return (h1 >> 12) * _MANTISSA_SCALE


def java_key_hash(routing_key: str) -> float:
    """The point in ``[0, 1)`` the Java Pravega client maps ``routing_key`` to.

    ``HashHelper.seededWith("EventRouter").hashToRange(routing_key)``: MurmurHash3 x64-128 of the
    key's UTF-16LE code units, no padding. A lone surrogate is hashed as its code unit, as a
    Java ``String`` holding it would be. Equal to ``pravega_key_hash`` for ASCII keys.
    """
    units = routing_key.encode("utf-16-le", "surrogatepass")
    length = len(units)
    h1, _ = _murmur3_padded(units + bytes(-length & 15), length, PRAVEGA_ROUTING_KEY_SEED)
    return (h1 >> 12) * _MANTISSA_SCALE
