"""A hostile user, automated: random valid and invalid calls through the public API.

A hypothesis state machine drives an in-process cluster (memory backends) through the
public client API: scopes, streams, writers, readers, reader groups, key-value tables,
and garbage arguments to every call, with whole-cluster restarts in between. It asserts
what every public boundary must hold to (docs/api.md, "What each call raises"):

* a call either works or raises a typed error: a :class:`PravegaError` (from
  ``pravega_ray.errors``), or a ``TypeError`` for a call of the wrong shape; nothing else
  (no AttributeError, KeyError, struct.error, RecursionError, UnicodeError, bare ValueError);
* a refused call changes nothing (the model and the cluster keep agreeing);
* everything acknowledged before is intact after a restart: every event read back exactly
  once and in order per routing key, every key-value entry with its value and version.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import event as count
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

import pravega_ray as pr
from pravega_ray import constants
from pravega_ray.errors import PravegaError
from pravega_ray.inprocess import InProcessCluster

pytestmark = pytest.mark.timeout(600)

SCOPES = st.sampled_from(["s1", "s2"])
STREAMS = st.sampled_from(["a", "b"])
TABLES = st.sampled_from(["t1", "t2"])
KEYS = st.sampled_from(["k1", "k2", "k3", "rk-\u00e9"])
PAYLOADS = st.binary(min_size=0, max_size=64)
NOT_A_NAME = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.binary(max_size=4),
    st.lists(st.integers(), max_size=2),
    st.sampled_from(["", ".", "..", "../etc", "a/b", "_system", "x" * 300, "\ud800", "a b"]),
)
"""Values that are never valid scope, stream, table or reader-group names."""

GARBAGE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)

VALID_CONFIGS = st.builds(
    lambda n: pr.StreamConfiguration(scaling=pr.ScalingPolicy.fixed(n)), st.integers(1, 3)
)


def _bad_config() -> st.SearchStrategy[Any]:
    def build(kind: int, value: Any) -> Any:
        # Building the bad object may itself raise the typed error: that is the point.
        return [
            lambda: pr.StreamConfiguration(scaling=value),
            lambda: pr.StreamConfiguration(retention=value),
            lambda: pr.ScalingPolicy("bogus", 5, 3, 1),
            lambda: pr.ScalingPolicy.fixed(value),
            lambda: pr.ScalingPolicy.by_event_rate(value, 2, 1),
            lambda: pr.RetentionPolicy.by_size(value, 5),
            lambda: pr.StreamConfiguration(
                pr.ScalingPolicy(pr.ScalingPolicy.fixed(1).scale_type, value, value, 1)
            ),
            lambda: value,
        ][kind]

    return st.builds(build, st.integers(0, 7), GARBAGE)


class Refused(Exception):
    """The call raised a typed error (kept so rules can assert on it)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run ``fn``; re-raise typed errors as Refused, let anything else fail the test."""
    try:
        return fn(*args, **kwargs)
    except (PravegaError, TypeError) as e:
        assert not isinstance(e, TypeError) or "argument" in str(e) or "must be" in str(e), e
        raise Refused(e) from e


def refused(fn: Any, *args: Any, **kwargs: Any) -> BaseException | None:
    """The typed error ``fn`` raised, or None if it worked."""
    try:
        call(fn, *args, **kwargs)
    except Refused as r:
        return r.error
    return None


class PublicApi(RuleBasedStateMachine):
    """Model: scopes, streams (sealed flag, events per key), tables (key -> value, version)."""

    def __init__(self) -> None:
        super().__init__()
        self.cluster = InProcessCluster(container_count=2)
        self.scopes: set[str] = set()
        self.streams: dict[tuple[str, str], dict[str, Any]] = {}
        self.tables: dict[tuple[str, str], dict[bytes, tuple[bytes, int]]] = {}

    @initialize()
    def start(self) -> None:
        """Two scopes, two streams and a table exist from the start (rules may delete them)."""
        self.mgr = self.cluster.stream_manager()
        for scope in ("s1", "s2"):
            assert self.mgr.create_scope(scope)
            self.scopes.add(scope)
        for (scope, stream), segments in {("s1", "a"): 2, ("s2", "b"): 1}.items():
            config = pr.StreamConfiguration(pr.ScalingPolicy.fixed(segments))
            assert self.mgr.create_stream(scope, stream, config)
            self.streams[(scope, stream)] = {"sealed": False, "events": {}}
        assert self.mgr.create_key_value_table("s1", "t1", 2)
        self.tables[("s1", "t1")] = {}

    def teardown(self) -> None:
        self.cluster.shutdown()

    # --- scopes and streams -----------------------------------------------------------------
    @rule(scope=SCOPES)
    def create_scope(self, scope: str) -> None:
        assert call(self.mgr.create_scope, scope) == (scope not in self.scopes)
        self.scopes.add(scope)

    @rule(scope=SCOPES)
    def delete_scope(self, scope: str) -> None:
        empty = not any(s == scope for s, _ in [*self.streams, *self.tables])
        error = refused(self.mgr.delete_scope, scope)
        if scope in self.scopes and not empty:
            assert isinstance(error, pr.ScopeNotEmptyError), error
        else:
            assert error is None, error
            self.scopes.discard(scope)

    @rule(scope=SCOPES, stream=STREAMS, config=VALID_CONFIGS)
    def create_stream(self, scope: str, stream: str, config: pr.StreamConfiguration) -> None:
        error = refused(self.mgr.create_stream, scope, stream, config)
        if scope not in self.scopes:
            assert isinstance(error, pr.ScopeNotFoundError), error
            return
        assert error is None, error
        self.streams.setdefault((scope, stream), {"sealed": False, "events": {}})

    @rule(scope=SCOPES, stream=STREAMS, config=_bad_config())
    def create_stream_with_a_bad_config(self, scope: str, stream: str, config: Any) -> None:
        try:
            made = config()
        except (PravegaError, TypeError):
            return  # refused while building it: fine
        error = refused(self.mgr.create_stream, scope, f"bad-{stream}", made)
        if error is None:  # the value happened to be valid: keep the model in step
            self.streams[(scope, f"bad-{stream}")] = {"sealed": False, "events": {}}

    @rule(scope=SCOPES, stream=STREAMS)
    def seal_stream(self, scope: str, stream: str) -> None:
        error = refused(self.mgr.seal_stream, scope, stream)
        if (scope, stream) in self.streams:
            assert error is None, error
            self.streams[(scope, stream)]["sealed"] = True

    # --- events -----------------------------------------------------------------------------
    @rule(scope=SCOPES, stream=STREAMS, key=KEYS, payloads=st.lists(PAYLOADS, max_size=20))
    def write(self, scope: str, stream: str, key: str, payloads: list[bytes]) -> None:
        model = self.streams.get((scope, stream))
        try:
            writer = call(self.cluster.create_writer, scope, stream)
        except Refused as r:
            assert model is None or model["sealed"], r.error
            return
        assert model is not None
        with writer:
            futures = [call(writer.write_event, p, routing_key=key) for p in payloads]
            for future in futures:
                future.result(30)
        model["events"].setdefault(key, []).extend(payloads)
        count("wrote events")

    @rule(
        scope=SCOPES,
        stream=STREAMS,
        event=GARBAGE,
        key=st.one_of(KEYS, GARBAGE),
    )
    def write_garbage(self, scope: str, stream: str, event: Any, key: Any) -> None:
        if (scope, stream) not in self.streams or self.streams[(scope, stream)]["sealed"]:
            return
        with call(self.cluster.create_writer, scope, stream) as writer:
            if isinstance(event, bytes) and (key is None or isinstance(key, str)):
                return  # could be valid; the write rule covers it
            assert refused(writer.write_event, event, routing_key=key) is not None

    @rule(scope=SCOPES, stream=STREAMS, size=st.sampled_from([8 * 1024 * 1024 + 1, 9 << 20]))
    def write_too_big(self, scope: str, stream: str, size: int) -> None:
        if (scope, stream) not in self.streams or self.streams[(scope, stream)]["sealed"]:
            return
        # Over 8 MiB an event is a large event up to LARGE_EVENT_BYTES_MAX (1 GiB): lower
        # that limit here, so "too big" stays cheap to build.
        limit = constants.LARGE_EVENT_BYTES_MAX
        constants.LARGE_EVENT_BYTES_MAX = constants.MAX_EVENT_SIZE_BYTES
        try:
            with call(self.cluster.create_writer, scope, stream) as writer:
                refusal = refused(writer.write_event, b"x" * size)
                assert isinstance(refusal, pr.EventTooLargeError)
        finally:
            constants.LARGE_EVENT_BYTES_MAX = limit

    @rule(scope=SCOPES, stream=STREAMS)
    def read_everything(self, scope: str, stream: str) -> None:
        model = self.streams.get((scope, stream))
        group = "rg" + uuid.uuid4().hex[:8]
        error = refused(
            self.cluster.create_reader_group,
            scope,
            group,
            pr.ReaderGroupConfig.for_streams(f"{scope}/{stream}"),
        )
        if model is None:
            assert error is not None
            return
        assert error is None, error
        expected = sum(len(v) for v in model["events"].values())
        got: dict[str, list[bytes]] = {}
        seen: list[bytes] = []
        with call(self.cluster.create_reader, "r1", scope, group) as reader:
            while len(seen) < expected:
                event = call(reader.read_next_event, timeout_s=5.0)
                assert event is not None, f"only {len(seen)} of {expected} events came back"
                seen.append(event.event)
            assert call(reader.read_next_event, timeout_s=0.05) is None  # nothing extra
        # Order per routing key: each key's events are a subsequence of what was read.
        for key, events in model["events"].items():
            position = 0
            for event in seen:
                if position < len(events) and event == events[position]:
                    position += 1
            assert position == len(events), f"events of {key!r} out of order or missing"
            got[key] = events
        assert sorted(seen) == sorted(e for v in model["events"].values() for e in v)
        count("read back events" if seen else "read back an empty stream")
        call(self.cluster.delete_reader_group, scope, group)

    # --- key-value tables -------------------------------------------------------------------
    @rule(scope=SCOPES, table=TABLES, partitions=st.one_of(st.integers(1, 4), GARBAGE))
    def create_table(self, scope: str, table: str, partitions: Any) -> None:
        error = refused(self.mgr.create_key_value_table, scope, table, partitions)
        valid = isinstance(partitions, int) and not isinstance(partitions, bool)
        valid = valid and 1 <= partitions <= 1024
        if scope in self.scopes and valid:
            assert error is None, error
            self.tables.setdefault((scope, table), {})
        else:
            assert error is not None

    @rule(scope=SCOPES, table=TABLES)
    def delete_table(self, scope: str, table: str) -> None:
        error = refused(self.mgr.delete_key_value_table, scope, table)
        if scope not in self.scopes:
            assert isinstance(error, pr.ScopeNotFoundError), error
            return
        assert error is None, error
        self.tables.pop((scope, table), None)

    @precondition(lambda self: bool(self.tables))
    @rule(data=st.data(), key=st.binary(min_size=1, max_size=8), value=PAYLOADS)
    def table_update(self, data: st.DataObject, key: bytes, value: bytes) -> None:
        name = data.draw(st.sampled_from(sorted(self.tables)))
        model = self.tables[name]
        kvt = call(self.cluster.key_value_table, *name)
        op = data.draw(st.sampled_from(["put", "put_if_absent", "replace", "remove", "stale"]))
        current = model.get(key)
        count(f"table {op}")
        if op == "put":
            model[key] = (value, call(kvt.put, key, value))
        elif op == "put_if_absent":
            error = refused(kvt.put_if_absent, key, value)
            if current is None:
                assert error is None, error
                model[key] = (value, kvt.get(key).version)
            else:
                assert isinstance(error, pr.BadKeyVersionError), error
        elif op == "replace" and current is not None:
            model[key] = (value, call(kvt.replace, key, value, current[1]))
        elif op == "remove":
            call(kvt.remove, key)
            model.pop(key, None)
        elif op == "stale" and current is not None:
            error = refused(kvt.replace, key, value, current[1] + 1)
            assert isinstance(error, pr.BadKeyVersionError), error

    @precondition(lambda self: bool(self.tables))
    @rule(data=st.data(), key=GARBAGE, value=GARBAGE, version=GARBAGE)
    def table_garbage(self, data: st.DataObject, key: Any, value: Any, version: Any) -> None:
        name = data.draw(st.sampled_from(sorted(self.tables)))
        kvt = call(self.cluster.key_value_table, *name)
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            assert refused(kvt.replace, b"k", b"v", version) is not None
        if not isinstance(key, bytes) or not key:
            assert refused(kvt.put, key, b"v") is not None
        if not isinstance(value, bytes):
            assert refused(kvt.put, b"k", value) is not None

    # --- garbage everywhere -----------------------------------------------------------------
    @rule(name=NOT_A_NAME, other=GARBAGE, data=st.data())
    def garbage_arguments(self, name: Any, other: Any, data: st.DataObject) -> None:
        """A garbage name is always refused; a garbage optional argument may be a valid one
        (None means "the default"), and then the call must simply work."""
        mgr, cluster = self.mgr, self.cluster
        stream_exists = ("s1", "a") in self.streams and not self.streams[("s1", "a")]["sealed"]
        calls: list[tuple[Any, bool]] = [  # (call, may it succeed?)
            (lambda: mgr.create_scope(name), False),
            (lambda: mgr.delete_scope(name), False),
            (lambda: mgr.create_stream(name, "a"), False),
            (lambda: mgr.create_stream("s1", name), False),
            (lambda: mgr.create_stream("s1", "z", other), False),
            (lambda: mgr.get_stream_info("s1", name), False),
            (lambda: mgr.seal_stream(name, "a"), False),
            (lambda: mgr.list_streams(name), False),
            (lambda: mgr.create_key_value_table("s1", name), False),
            (lambda: mgr.create_key_value_table("s1", "t9", other), False),
            (lambda: mgr.delete_key_value_table(name, "t1"), False),
            (lambda: cluster.create_writer(name, "a"), False),
            (lambda: cluster.create_writer("s1", "a", serializer=other), stream_exists),
            (lambda: cluster.create_writer("s1", "a", config=other), stream_exists),
            (lambda: cluster.create_reader_group("s1", name, other), False),
            (lambda: cluster.create_reader_group("s1", "g9", other), False),
            (lambda: cluster.create_reader(name, "s1", "g"), False),
            (lambda: cluster.create_reader("r", "s1", name), False),
            (lambda: cluster.delete_reader_group("s1", name), False),
            (lambda: cluster.reader_group("s1", name), False),
            (lambda: cluster.key_value_table("s1", name), False),
            (lambda: pr.ReaderGroupConfig.for_streams(name), name == "a/b"),  # scope/stream
            (lambda: pr.WriterConfig(linger_s=other), True),
            (lambda: pr.WriterConfig(blocks_queued_max=other), True),
            (lambda: pr.StreamConfiguration(other), False),
            (lambda: pr.ScalingPolicy.fixed(other), True),
        ]
        index = data.draw(st.integers(0, len(calls) - 1), label="call")
        function, may_succeed = calls[index]
        try:
            result = call(function)
        except Refused:
            return
        if isinstance(result, pr.EventStreamWriter):
            result.close()
        partitions = isinstance(other, int) and not isinstance(other, bool) and 1 <= other <= 1024
        allowed = may_succeed or (index == 4 and other is None) or (index == 9 and partitions)
        assert allowed, f"call {index} accepted garbage: name={name!r} other={other!r}"
        if index == 4:  # create_stream(..., None): the default configuration, a real stream
            self.streams.setdefault(("s1", "z"), {"sealed": False, "events": {}})
        if index == 9:  # create_key_value_table(..., partitions): a valid count, a real table
            self.tables.setdefault(("s1", "t9"), {})

    # --- restarts ---------------------------------------------------------------------------
    @rule()
    def restart(self) -> None:
        self.cluster.restart()
        count("restart with data" if self.streams or self.tables else "restart")
        self.mgr = self.cluster.stream_manager()
        for (scope, stream), model in self.streams.items():
            info = call(self.mgr.get_stream_info, scope, stream)
            assert info.sealed == model["sealed"]
        for name, model in self.tables.items():
            kvt = call(self.cluster.key_value_table, *name)
            stored = {e.key: (e.value, e.version) for e in kvt.iter_entries()}
            assert stored == model


TestPublicApi = PublicApi.TestCase
TestPublicApi.settings = settings(
    max_examples=200,  # about 100 s alone on a 2-core machine (the suite keeps under 25 min)
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
