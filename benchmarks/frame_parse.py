"""The parse step of a raw Ray Data read alone, in process (no Ray): segment bytes, cut into
reads of ``READ_BYTES_MAX``, to the connector's Arrow table.

- ``per_event``: the raw path before ``FrameScanner``, still that of decoded reads:
  ``FrameAssembler.feed`` (a ``bytes`` per payload) + ``events_table`` (``pa.array`` of them);
- ``spans``: ``FrameScanner.feed`` (frame positions only) + ``raw_events_table`` (one Arrow
  kernel call cuts the headers off), the raw path of ``pr.data.read_stream``.

Both run on the same bytes; the table shows the best of ``--repeats`` runs in ns per event.
Timings are noisy on a shared machine: read the ratio.

Run: ``.venv/bin/python -m benchmarks.frame_parse [--events 200000] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import functools

import pyarrow as pa

from benchmarks.common import best_seconds, print_table
from pravega_ray.client.event_framing import FrameAssembler, FrameScanner, frame_events
from pravega_ray.constants import READ_BYTES_MAX
from pravega_ray.data.event_blocks import events_table, layout_for, raw_events_table


def per_event(data: bytes) -> pa.Table:
    frames, offsets, payloads = FrameAssembler(), [], []
    for start in range(0, len(data), READ_BYTES_MAX):
        for offset, payload in frames.feed(data[start : start + READ_BYTES_MAX], start):
            offsets.append(offset)
            payloads.append(payload)
    return events_table(layout_for(None), "sc", "st", "sc/st/0", 0, offsets, payloads)


def spans(data: bytes) -> pa.Table:
    frames, found = FrameScanner(), []
    for start in range(0, len(data), READ_BYTES_MAX):
        found += frames.feed(data[start : start + READ_BYTES_MAX], start)
    return raw_events_table("sc", "st", 0, found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=200_000, help="events of 100 B")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for event_bytes, count in ((100, args.events), (1024, args.events // 10)):
        data = frame_events([bytes([i % 251]) * event_bytes for i in range(count)])
        assert per_event(data).equals(spans(data))
        old = best_seconds(functools.partial(per_event, data), args.repeats)
        new = best_seconds(functools.partial(spans, data), args.repeats)
        rows.append([event_bytes, count, old / count * 1e9, new / count * 1e9, old / new])
    print_table(
        f"raw parse, best of {args.repeats} (ns per event)",
        ["event B", "events", "per_event ns", "spans ns", "speedup"],
        rows,
    )


if __name__ == "__main__":
    main()
