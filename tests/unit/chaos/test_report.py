"""The chaos report's pieces that need no cluster: what the acknowledgements say."""

from __future__ import annotations

from types import SimpleNamespace

from chaos.checker import Read
from chaos.load import UNTIMED, Acks
from chaos.run import slowest_acks


def test_only_small_events_are_timed_and_a_pipeline_write_counts_once() -> None:
    acks = Acks()
    acks.done("w0k0", 0, 0.0, None)
    acks.done("wlarge", 0, 0.0, None, "large")
    for i in range(1000):
        acks.done("p0", i, 0.0, None, UNTIMED if i else "pipeline")
    acks.done("w0k0", 1, 0.0, RuntimeError("lost"))
    assert [(key, seq) for _, _, key, seq in acks.latencies] == [("w0k0", 0)]
    assert {kind: len(took) for kind, took in acks.slow.items()} == {"large": 1, "pipeline": 1}
    assert acks.acked["p0"] == set(range(1000))
    assert acks.unknown["w0k0"] == {1} and dict(acks.errors) == {"RuntimeError": 1}


def test_the_slowest_acknowledgements_one_a_minute_with_their_container_and_faults() -> None:
    segment = "chaos/keyed/3.#epoch.1"
    reads = [
        Read("r0", "chaos/keyed/0.#epoch.0", 0, "k", "w1k5", 0),
        Read("r0", segment, 9, "k", "w1k5", 7),
    ]
    injector = SimpleNamespace(
        started=100.0,
        applied=[
            {
                "kind": "container_kill",
                "target": "segment-container-1",
                "at_s": 20.0,
                "recovered_s": 9.5,
            },
            {"kind": "reader_kill", "target": "reader-2", "at_s": 500.0},
        ],
    )
    # (acknowledged at, took, key): the run started at monotonic 100.
    latencies = [
        (140.0, 15.0, "w1k5", 7),  # begun at 25 s, read from the segment of epoch 1
        (141.0, 14.0, "w1k5", 8),  # begun at 27 s: the same minute, left out
        (200.0, 1.0, "w2k6", 0),  # begun at 99 s
        (700.0, 0.5, "w3k7", 0),  # begun at 599.5 s: beyond count
    ]
    lines = slowest_acks(latencies, reads, injector, count=2)  # type: ignore[arg-type]
    assert len(lines) == 2
    assert lines[0].startswith("15.0s for w1k5:7 (chaos/keyed/3.#epoch.1, container ")
    assert lines[0].endswith(
        "begun at 25.0s; faults: container_kill segment-container-1 at 20.0s (back in 9.5s)"
    )
    assert lines[1] == "1.0s for w2k6:0 (never read), begun at 99.0s; faults: none"
