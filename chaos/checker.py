"""The invariants a chaos run is judged by, over what the load recorded (no Ray, no I/O).

The load (:mod:`chaos.load`) encodes what each event is in its first line
(:func:`encode_keyed`, :func:`encode_txn`), records what the system acknowledged, and
records every event the reader group returned as a :class:`Read`. The checks here compare
the two:

* **keyed events** (writers with a sequence number per routing key): every acknowledged
  event read exactly once (``lost``, ``duplicated``); per key, sequence numbers read in
  increasing order (``reordered``: a number lower than one read before it); nothing read that
  no writer wrote (``phantom``). A write whose future failed has an unknown outcome: it may
  be read once or not at all.
* **transactions**: a committed one read whole, each event once, and on each segment as one
  contiguous run (``torn_transactions``); an aborted or timed-out one never read
  (``aborted_visible``).
* **a zombie container's appends**: those acknowledged while it owned the container read
  once, like keyed events; those begun after its successor started never read
  (``zombie_visible``: the phantoms of :func:`check_keyed` over the zombie's reads).
* **key-value tables** (counters kept as the list of update ids applied): every
  acknowledged conditional update present in the final value (``kv_lost``), none present
  that was refused (``kv_phantom``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

HEADER_END = b"\n"


def encode_keyed(key: str, seq: int, size: int) -> bytes:
    """A keyed event: ``k <key> <seq>`` padded with ``.`` to ``size`` bytes (at least the
    header)."""
    head = f"k {key} {seq}".encode() + HEADER_END
    return head + b"." * max(0, size - len(head))


def encode_txn(tag: str, index: int, count: int, size: int) -> bytes:
    """Event ``index`` of ``count`` of transaction ``tag``, padded to ``size`` bytes."""
    head = f"t {tag} {index} {count}".encode() + HEADER_END
    return head + b"." * max(0, size - len(head))


def encode_zombie(name: str, seq: int, size: int) -> bytes:
    """Append ``seq`` of zombie container ``name`` (:mod:`chaos.zombie`)."""
    head = f"z {name} {seq}".encode() + HEADER_END
    return head + b"." * max(0, size - len(head))


@dataclass(frozen=True)
class Read:
    """One event returned by a reader of the group: where it was and what it says it is."""

    reader: str
    segment: str
    offset: int
    kind: str  # "k" keyed, "t" transactional, "z" a zombie's, "?" undecodable
    ident: str  # the key, or the transaction's tag
    seq: int  # the sequence number, or the index in the transaction
    count: int = 0  # a transaction's event count
    at: float = 0.0  # when it was read (seconds into the run; for the examples)


def decode(reader: str, segment: str, offset: int, payload: bytes, at: float = 0.0) -> Read:
    """The :class:`Read` of ``payload`` (kind ``?`` if it is not one of ours: altered)."""
    head, _, _ = payload.partition(HEADER_END)
    parts = head.decode("ascii", "replace").split(" ")
    try:
        if parts[0] in ("k", "z") and len(parts) == 3:
            return Read(reader, segment, offset, parts[0], parts[1], int(parts[2]), at=at)
        if parts[0] == "t" and len(parts) == 4:
            count = int(parts[3])
            return Read(reader, segment, offset, "t", parts[1], int(parts[2]), count, at)
    except ValueError:
        pass
    return Read(reader, segment, offset, "?", head[:40].decode("ascii", "replace"), -1, at=at)


def where(read: Read) -> str:
    """``segment@offset (reader, at N s)``: where an example was read."""
    return f"{read.segment}@{read.offset} ({read.reader}, at {read.at:.1f}s)"


@dataclass
class _Verdict:
    """What every check returns besides its counts: a few examples of what broke."""

    examples: list[str] = field(default_factory=list)
    examples_max: int = field(default=10, repr=False)

    def note(self, text: str) -> None:
        if len(self.examples) < self.examples_max:
            self.examples.append(text)


@dataclass
class KeyedVerdict(_Verdict):
    acked: int = 0
    read: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    phantom: int = 0


def check_keyed(
    acked: Mapping[str, Iterable[int]],
    unknown: Mapping[str, Iterable[int]],
    reads: Sequence[Read],
    *,
    examples_max: int = 10,
) -> KeyedVerdict:
    """Keyed events: ``acked`` and ``unknown`` (failed futures) sequence numbers per key
    against ``reads`` in the order the group returned them."""
    verdict = KeyedVerdict(examples_max=examples_max)
    acked_sets = {key: set(seqs) for key, seqs in acked.items()}
    unknown_sets = {key: set(seqs) for key, seqs in unknown.items()}
    verdict.acked = sum(len(s) for s in acked_sets.values())

    seen: dict[str, dict[int, Read]] = defaultdict(dict)
    highest: dict[str, int] = {}
    for read in reads:
        if read.kind != "k":
            continue
        verdict.read += 1
        key, seq = read.ident, read.seq
        first = seen[key].get(seq)
        if first is not None:
            verdict.duplicated += 1
            verdict.note(f"duplicate {key}#{seq} at {where(read)}, first at {where(first)}")
            continue
        seen[key][seq] = read
        if seq not in acked_sets.get(key, ()) and seq not in unknown_sets.get(key, ()):
            verdict.phantom += 1
            verdict.note(f"phantom {key}#{seq} at {where(read)}")
        if key in highest and seq < highest[key]:
            verdict.reordered += 1
            verdict.note(f"reordered {key}#{seq} after #{highest[key]} at {where(read)}")
        highest[key] = max(seq, highest.get(key, seq))
    for key, seqs in sorted(acked_sets.items()):
        missing = sorted(seqs - seen.get(key, {}).keys())
        verdict.lost += len(missing)
        if missing:
            verdict.note(f"lost {key}: {len(missing)} acknowledged, first #{missing[0]}")
    return verdict


@dataclass(frozen=True)
class TxnOutcome:
    """A transaction the load began: ``status`` is ``committed``, ``aborted``, ``timed_out``
    (left to its lease) or ``unknown`` (its commit failed in a way that does not say)."""

    tag: str
    count: int
    status: str


@dataclass
class TxnVerdict(_Verdict):
    committed: int = 0
    aborted: int = 0
    timed_out: int = 0
    unknown: int = 0
    torn_transactions: int = 0
    aborted_visible: int = 0
    duplicated: int = 0
    phantom: int = 0


def check_transactions(
    outcomes: Sequence[TxnOutcome],
    reads: Sequence[Read],
    segment_reads: Mapping[str, Sequence[Read]],
    *,
    examples_max: int = 10,
) -> TxnVerdict:
    """Transactions: ``reads`` in group order; ``segment_reads``: every read of each
    segment that holds a transaction's events (any kind), to check contiguity by offset."""
    verdict = TxnVerdict(examples_max=examples_max)
    by_tag = {o.tag: o for o in outcomes}

    got: dict[str, list[Read]] = defaultdict(list)
    for read in reads:
        if read.kind == "t":
            got[read.ident].append(read)
    for tag, events in got.items():
        if tag not in by_tag:
            verdict.phantom += len(events)
            verdict.note(f"phantom transaction {tag}: {len(events)} events read")
    for outcome in outcomes:
        events = got.get(outcome.tag, [])
        if outcome.status == "committed":
            verdict.committed += 1
        elif outcome.status == "aborted":
            verdict.aborted += 1
        elif outcome.status == "timed_out":
            verdict.timed_out += 1
        else:
            verdict.unknown += 1
        if outcome.status in ("aborted", "timed_out"):
            if events:
                verdict.aborted_visible += 1
                verdict.note(
                    f"{outcome.status} transaction {outcome.tag}: {len(events)} events read"
                )
            continue
        indexes = [e.seq for e in events]
        duplicates = len(indexes) - len(set(indexes))
        verdict.duplicated += duplicates
        if outcome.status == "unknown" and not events:
            continue  # it may have been aborted: nothing visible is consistent
        whole = sorted(set(indexes)) == list(range(outcome.count))
        if not whole or duplicates or not _contiguous(outcome.tag, events, segment_reads):
            verdict.torn_transactions += 1
            verdict.note(
                f"torn transaction {outcome.tag} ({outcome.status}): {len(set(indexes))} "
                f"of {outcome.count} events, {duplicates} duplicated"
            )
    return verdict


def _contiguous(
    tag: str, events: Sequence[Read], segment_reads: Mapping[str, Sequence[Read]]
) -> bool:
    """On each segment, the transaction's events are one run: no other event between them."""
    for segment in {e.segment for e in events}:
        ordered = sorted(segment_reads.get(segment, ()), key=lambda r: r.offset)
        marks = [r.kind == "t" and r.ident == tag for r in ordered]
        if True not in marks:
            return False
        first = marks.index(True)
        last = len(marks) - 1 - marks[::-1].index(True)
        if not all(marks[first : last + 1]):
            return False
    return True


@dataclass
class KvVerdict(_Verdict):
    keys: int = 0
    acked_updates: int = 0
    kv_lost: int = 0
    kv_phantom: int = 0


def check_key_values(
    acked: Mapping[str, Iterable[str]],
    refused: Mapping[str, Iterable[str]],
    final: Mapping[str, Sequence[str]],
    *,
    examples_max: int = 10,
) -> KvVerdict:
    """Key-value counters: per key, the update ids acknowledged, refused (a failed
    condition: never applied) and the ids the final value lists."""
    verdict = KvVerdict(keys=len(final), examples_max=examples_max)
    for key in sorted(set(acked) | set(final)):
        present = list(final.get(key, ()))
        acked_ids = set(acked.get(key, ()))
        verdict.acked_updates += len(acked_ids)
        missing = acked_ids - set(present)
        applied_refused = set(refused.get(key, ())) & set(present)
        duplicated = len(present) - len(set(present))
        verdict.kv_lost += len(missing)
        verdict.kv_phantom += len(applied_refused) + duplicated
        if missing or applied_refused or duplicated:
            verdict.note(
                f"key {key}: {len(missing)} acknowledged updates missing, "
                f"{len(applied_refused)} refused ones applied, {duplicated} applied twice"
            )
    return verdict
