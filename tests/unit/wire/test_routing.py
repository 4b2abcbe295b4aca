"""Pravega's routing-key hash (pravega_ray/wire/routing.py) against published and recorded vectors.

Where the expected values come from:

- murmur3 x64-128: the reference's SMHasher verification value, the unit tests of the Rust crate
  the official client links (``murmurhash3`` 0.0.5), and Guava's known values (the Java client).
- ``pravega_key_hash``: the Rust client's own unit test, plus values recorded from the official
  client, PyPI ``pravega`` 0.3.8 (``pravega-0.3.8-cp311-cp311-manylinux_2_35_x86_64.whl``): its
  writer was pointed at a throwaway fake controller and segment store in which the stream of each
  key had three segments, the middle one ``[nextafter(v, 0), v]`` for the expected value ``v``;
  every event landed in the middle segment, i.e. the client computed exactly ``v`` (and with the
  Java values as ``v``, no non-ASCII key did). The same values came out of calling the wheel's
  compiled ``murmurhash3_x64_128`` and ``encoding_rs::mem::convert_str_to_utf16`` in the
  sequence ``get_segment_for_string`` runs them (1,620 murmur inputs, 321 keys: no difference).
- ``java_key_hash``: values recorded by replaying
  ``HashHelper.seededWith("EventRouter").hashToRange(key)`` (pravega/pravega
  ``common/src/main/java/io/pravega/common/hash/HashHelper.java``) with Guava 32.1.3 on
  OpenJDK 17 (Pravega pins Guava 32.0.1): 522 keys, no difference.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pravega_ray.wire.routing import (
    PRAVEGA_ROUTING_KEY_SEED,
    java_key_hash,
    long_to_double_fraction,
    murmur3_x64_128,
    pravega_key_hash,
)

pytestmark = pytest.mark.timeout(60)

# mhallin/murmurhash3-rs src/mmh3_128.rs, tests test_empty_string, test_tail_lengths and
# test_large_data (crate version 0.0.5, which pravega-client-rust's shared/Cargo.toml asks for).
# ASCII input, seed 0, every tail length 0..15 and one input of several blocks.
CRATE_VECTORS: list[tuple[bytes, int, int]] = [
    (b"", 0, 0),
    (b"1", 8213365047359667313, 10676604921780958775),
    (b"12", 5355690773644049813, 9855895140584599837),
    (b"123", 10978418110857903978, 4791445053355511657),
    (b"1234", 619023178690193332, 3755592904005385637),
    (b"12345", 2375712675693977547, 17382870096830835188),
    (b"123456", 16435832985690558678, 5882968373513761278),
    (b"1234567", 3232113351312417698, 4025181827808483669),
    (b"12345678", 4272337174398058908, 10464973996478965079),
    (b"123456789", 4360720697772133540, 11094893415607738629),
    (b"123456789a", 12594836289594257748, 2662019112679848245),
    (b"123456789ab", 6978636991469537545, 12243090730442643750),
    (b"123456789abc", 211890993682310078, 16480638721813329343),
    (b"123456789abcd", 12459781455342427559, 3193214493011213179),
    (b"123456789abcde", 12538342858731408721, 9820739847336455216),
    (b"123456789abcdef", 9165946068217512774, 2451472574052603025),
    (b"123456789abcdef1", 9259082041050667785, 12459473952842597282),
    (
        b"Lorem ipsum dolor sit amet, consectetur adipiscing elit. Etiam at consequat massa. "
        b"Cras eleifend pellentesque ex, at dignissim libero maximus ut. Sed eget nulla felis",
        9455322759164802692,
        17863277201603478371,
    ),
]

# google/guava guava-tests/test/com/google/common/hash/Murmur3Hash128Test.java, testKnownValues:
# (seed, first long, second long, ASCII input).
GUAVA_VECTORS: list[tuple[int, int, int, bytes]] = [
    (0, 0x629942693E10F867, 0x92DB0B82BAEB5347, b"hell"),
    (1, 0xA78DDFF5ADAE8D10, 0x128900EF20900135, b"hello"),
    (2, 0x8A486B23F422E826, 0xF962A2C58947765F, b"hello "),
    (3, 0x2EA59F466F6BED8C, 0xC610990ACC428A17, b"hello w"),
    (4, 0x79F6305A386C572C, 0x46305AED3483B94E, b"hello wo"),
    (5, 0xC2219D213EC1F1B5, 0xA1D8E2E0A52785BD, b"hello wor"),
    (0, 0xE34BBC7BBC071B6C, 0x7A433CA9C49A9347, b"The quick brown fox jumps over the lazy dog"),
    (0, 0x658CA970FF85269A, 0x43FEE3EAA68E5C3E, b"The quick brown fox jumps over the lazy cog"),
]

# Keys on which the Rust and Java clients agree (every ASCII key): the first five are the
# routing keys of the official Python client's own tests; the values were recorded from the
# pravega 0.3.8 wheel and from Java (see the module docstring).
ASCII_KEY_VECTORS: list[tuple[str, float]] = [
    ("", 0.24117842791623523),
    ("hello", 0.658716230571337),
    ("key", 0.8449093464660018),
    ("key1", 0.6927653144825257),
    ("key2", 0.596180323189972),
    ("EventRouter", 0.23545599022161245),
    ("\x00", 0.5906815497255793),
    ("a" * 100, 0.31658629312518904),
]

# (key, Rust client value recorded from the pravega 0.3.8 wheel, Java value recorded with Guava).
NON_ASCII_KEY_VECTORS: list[tuple[str, float, float]] = [
    ("\u00e9", 0.20425248406362173, 0.6688272069632242),
    ("\u00fc", 0.7400955746029398, 0.21214094829222452),
    ("h\u00e9llo", 0.8984617185599588, 0.27117037262037313),
    ("na\u00efve caf\u00e9", 0.23447392149535462, 0.2649586171904692),
    ("\u4e2d", 0.8085750047431115, 0.5520139205239822),
    ("\u65e5\u672c\u8a9e\u306e\u30ad\u30fc", 0.9599577605582736, 0.9428898578521503),
    ("\uffff", 0.7393001574088438, 0.5282896690782055),
    # Outside the BMP: a surrogate pair in UTF-16, four bytes in UTF-8.
    ("\U0001f600", 0.04908282262196351, 0.7750255912171164),
    ("\U0001d11e", 0.29873901659817714, 0.08749812211129204),
    ("\U0010ffff", 0.8522958127882703, 0.9593395615503006),
    ("a\U0001f600b", 0.7594402098699407, 0.8754248781775922),
    ("emoji \U0001f600 key", 0.1006155028316904, 0.9052429764402539),
]

# Lone surrogates: a Java String can hold one, a Rust &str cannot. Recorded with Guava.
LONE_SURROGATE_JAVA_VECTORS: list[tuple[str, float]] = [
    ("\ud800", 0.4172684016425481),
    ("x\udfffy", 0.9515775128854833),
]


def _java_string_hash_code(text: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 units, as int32."""
    units = text.encode("utf-16-le", "surrogatepass")
    value = 0
    for index in range(0, len(units), 2):
        value = (value * 31 + int.from_bytes(units[index : index + 2], "little")) & 0xFFFF_FFFF
    return value - (1 << 32) if value >= 1 << 31 else value


@pytest.mark.parametrize(("data", "h1", "h2"), CRATE_VECTORS)
def test_murmur3_matches_rust_crate_vectors(data: bytes, h1: int, h2: int) -> None:
    assert murmur3_x64_128(data, 0) == (h1, h2)


@pytest.mark.parametrize(("seed", "h1", "h2", "data"), GUAVA_VECTORS)
def test_murmur3_matches_guava_known_values(seed: int, h1: int, h2: int, data: bytes) -> None:
    assert murmur3_x64_128(data, seed) == (h1, h2)


def test_murmur3_passes_smhasher_verification() -> None:
    # aappleby/smhasher: KeysetTest.cpp VerificationTest, and the value 0x6384BA69 for
    # MurmurHash3_x64_128 ("Murmur3F") in main.cpp's table. Keys {}, {0}, {0,1}, ... {0..254}
    # hashed with seed 256 - length; the 256 digests (h1 then h2, little-endian) hashed with
    # seed 0; the first four bytes of that digest, little-endian.
    digests = bytearray()
    for length in range(256):
        h1, h2 = murmur3_x64_128(bytes(range(length)), 256 - length)
        digests += h1.to_bytes(8, "little") + h2.to_bytes(8, "little")
    final_h1, _ = murmur3_x64_128(bytes(digests), 0)
    assert final_h1 & 0xFFFF_FFFF == 0x6384BA69


def test_murmur3_empty_input_with_seed() -> None:
    # Only the finalization runs: both halves start at the seed and mix with length 0.
    h1, h2 = murmur3_x64_128(b"", PRAVEGA_ROUTING_KEY_SEED)
    assert long_to_double_fraction(h1) == 0.24117842791623523
    assert (h1, h2) != (0, 0)


@pytest.mark.parametrize("seed", [-1, 1 << 64])
def test_murmur3_rejects_seed_outside_64_bits(seed: int) -> None:
    with pytest.raises(ValueError):
        murmur3_x64_128(b"x", seed)


def test_murmur3_accepts_full_64_bit_seed() -> None:
    # A negative Guava (int) seed is sign-extended: -1 there is 2**64 - 1 here.
    assert murmur3_x64_128(b"x", (1 << 64) - 1) != murmur3_x64_128(b"x", (1 << 32) - 1)


def test_seed_is_java_hash_code_of_event_router() -> None:
    # pravega/pravega client/src/main/java/io/pravega/client/stream/impl/StreamSegments.java:
    # HashHelper.seededWith("EventRouter"); pravega-client-rust shared/src/lib.rs: SEED.
    assert _java_string_hash_code("EventRouter") == PRAVEGA_ROUTING_KEY_SEED == 1741865571


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # pravega/pravega common/src/test/java/io/pravega/common/hash/HashHelperTest.java,
        # testLongBits (there within 1e-7; exact here). Long.reverse(n) puts n's bits on top.
        (-1, 1.0 - 2.0**-52),
        (0, 0.0),
        (1 << 63, 0.5),
        (-(1 << 63), 0.5),
        (1 << 62, 0.25),
        (3 << 62, 0.75),
        (1 << 61, 0.125),
        (5 << 61, 0.625),
        (3 << 61, 0.375),
        (7 << 61, 0.875),
        # The low 12 bits are dropped.
        ((1 << 12) - 1, 0.0),
        (1 << 12, 2.0**-52),
        ((1 << 64) - 1, 1.0 - 2.0**-52),
    ],
)
def test_long_to_double_fraction(value: int, expected: float) -> None:
    assert long_to_double_fraction(value) == expected


@pytest.mark.parametrize("value", [-(1 << 63) - 1, 1 << 64])
def test_long_to_double_fraction_rejects_values_outside_64_bits(value: int) -> None:
    with pytest.raises(ValueError):
        long_to_double_fraction(value)


def test_pravega_key_hash_matches_rust_client_unit_test() -> None:
    # pravega/pravega-client-rust shared/src/lib.rs, test_hash: "hello" -> 0.658716230571337.
    assert pravega_key_hash("hello") == 0.658716230571337


@pytest.mark.parametrize(("key", "expected"), ASCII_KEY_VECTORS)
def test_pravega_key_hash_ascii_keys_match_both_clients(key: str, expected: float) -> None:
    assert pravega_key_hash(key) == expected
    assert java_key_hash(key) == expected


@pytest.mark.parametrize(("key", "rust", "java"), NON_ASCII_KEY_VECTORS)
def test_pravega_key_hash_non_ascii_keys_follow_rust_client(
    key: str, rust: float, java: float
) -> None:
    assert pravega_key_hash(key) == rust
    assert java_key_hash(key) == java
    assert rust != java


def test_pravega_key_hash_pads_with_one_zero_unit_per_extra_utf8_byte() -> None:
    # "\u00e9" is one UTF-16 unit and two UTF-8 bytes: Rust hashes the unit and one zero unit.
    padded = "\u00e9".encode("utf-16-le") + b"\x00\x00"
    assert pravega_key_hash("\u00e9") == long_to_double_fraction(
        murmur3_x64_128(padded, PRAVEGA_ROUTING_KEY_SEED)[0]
    )
    # "\U0001f600" is two units (a surrogate pair) and four UTF-8 bytes: two zero units.
    padded = "\U0001f600".encode("utf-16-le") + bytes(4)
    assert pravega_key_hash("\U0001f600") == long_to_double_fraction(
        murmur3_x64_128(padded, PRAVEGA_ROUTING_KEY_SEED)[0]
    )
    # Java hashes the units alone.
    assert java_key_hash("\u00e9") == long_to_double_fraction(
        murmur3_x64_128("\u00e9".encode("utf-16-le"), PRAVEGA_ROUTING_KEY_SEED)[0]
    )


@pytest.mark.parametrize(("key", "java"), LONE_SURROGATE_JAVA_VECTORS)
def test_lone_surrogate_rejected_like_rust_client_hashed_like_java(key: str, java: float) -> None:
    with pytest.raises(UnicodeEncodeError):
        pravega_key_hash(key)
    assert java_key_hash(key) == java


def test_pravega_key_hash_in_unit_interval_on_a_grid_of_2_pow_minus_52() -> None:
    rng = random.Random(5)
    alphabet = "aZ0 \x00\x7f\x80\u00e9\u07ff\u0800\u4e2d\uffff\U0001f600\U0010ffff"
    for _ in range(2000):
        key = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        value = pravega_key_hash(key)
        assert 0.0 <= value < 1.0
        assert (value * 2**52).is_integer()


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(codec="utf-8"), max_size=64))
def test_pravega_key_hash_in_unit_interval_and_deterministic(key: str) -> None:
    value = pravega_key_hash(key)
    assert 0.0 <= value < 1.0
    assert pravega_key_hash(key) == value
    if key.isascii():
        assert java_key_hash(key) == value


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=100), st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_murmur3_halves_are_unsigned_64_bit(data: bytes, seed: int) -> None:
    h1, h2 = murmur3_x64_128(data, seed)
    assert 0 <= h1 < 1 << 64
    assert 0 <= h2 < 1 << 64
