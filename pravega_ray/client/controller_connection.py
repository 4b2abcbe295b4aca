"""Which controller calls the client repeats when their outcome is unknown, and how.

A controller call fails with :class:`ControllerUnavailableError` when the controller
actor died or restarted mid-call: the call may or may not have taken effect. Repeating
it is safe only if doing it twice is the same as doing it once, so
:class:`RetryingControllerConnection` repeats (at most ``CONTROLLER_CALL_ATTEMPTS_MAX``
times, 0.5 s apart, logging each) exactly these:

* reads (``list_*``, ``get_*``, ``damaged_records``, ``reader_group_online_readers``);
* ``seal_stream`` (idempotent: True once sealed);
* creates, which it sends with a ``request_id`` the controller stores in the record,
  so a create that landed before its reply was lost answers True again, not False;
* the reader-group calls of a reader, which carry its session and are idempotent
  (``controller/reader_group_state.py``): joining again, leaving again, releasing a
  segment no longer owned; a sync answers with the whole owned set.

Deletes and ``reader_group_reader_offline`` are not repeated: a repeat could not tell
"I deleted it" from "it was not there". Their ControllerUnavailableError reaches the
caller, who knows whether to try again.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from pravega_ray.constants import CONTROLLER_CALL_ATTEMPTS_MAX
from pravega_ray.errors import ControllerUnavailableError

log = logging.getLogger(__name__)

CREATES = frozenset(
    {"create_scope", "create_stream", "create_key_value_table", "create_reader_group"}
)
"""Calls sent with a request id, which makes them safe to repeat."""

SAFE_TO_REPEAT = CREATES | frozenset(
    {
        "list_scopes",
        "list_streams",
        "list_key_value_tables",
        "get_stream_info",
        "get_current_segments",
        "get_cluster_config",
        "get_key_value_table",
        "get_active_key_value_table",
        "get_reader_group",
        "damaged_records",
        "reader_group_online_readers",
        "seal_stream",
        "reader_group_add_reader",
        "reader_group_remove_reader",
        "reader_group_sync",
        "reader_group_release",
    }
)

RETRY_PAUSE_S = 0.5


class RetryingControllerConnection:
    """Wraps a raw controller connection; repeats the calls that are safe to repeat."""

    def __init__(
        self,
        raw: Any,
        *,
        attempts_max: int = CONTROLLER_CALL_ATTEMPTS_MAX,
        pause_s: float = RETRY_PAUSE_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._raw = raw
        self._attempts_max = attempts_max
        self._pause_s = pause_s
        self._sleep = sleep

    @property
    def raw(self) -> Any:
        return self._raw

    def __getattr__(self, method: str) -> Any:
        if method.startswith("_"):
            raise AttributeError(method)
        target = getattr(self._raw, method)

        def call(*args: Any, **kwargs: Any) -> Any:
            if method in CREATES and kwargs.get("request_id") is None:
                kwargs["request_id"] = uuid.uuid4().hex
            if method not in SAFE_TO_REPEAT:
                return target(*args, **kwargs)
            for attempt in range(1, self._attempts_max + 1):
                try:
                    return target(*args, **kwargs)
                except ControllerUnavailableError as e:
                    if attempt == self._attempts_max:
                        raise
                    log.info("controller call %s: %s; repeating (%d)", method, e, attempt)
                    self._sleep(self._pause_s)
            raise AssertionError("unreachable")

        return call
