"""The tuning of one event writer (:class:`WriterConfig`), checked when it is built.

Split from ``writer.py`` (which re-exports it); the defaults come from
:mod:`pravega_ray.constants`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pravega_ray import constants
from pravega_ray.contracts.arguments import check_seconds, check_wait
from pravega_ray.errors import InvalidArgumentError

__all__ = ["WriterConfig"]


@dataclass(frozen=True, slots=True)
class WriterConfig:
    """Tuning of one writer; the defaults come from :mod:`pravega_ray.constants`.

    Every field is checked when the config is built; a bad one raises
    InvalidArgumentError naming it (bools, NaN, infinities and strs are refused):

    * ``block_bytes_target``: int, 1 to ``APPEND_BLOCK_BYTES_MAX`` (9 MiB + 8 bytes, the
      largest block a container accepts): a block is sent once it holds this many bytes.
      An event that would take the open block past ``APPEND_BLOCK_BYTES_MAX`` closes that
      block and starts the next, so every block fits whatever the target;
    * ``blocks_in_flight_max``: int, 1 to ``WRITER_BLOCKS_IN_FLIGHT_LIMIT`` (1024): append
      calls in flight per segment;
    * ``blocks_queued_max``: int, 1 to ``WRITER_BLOCKS_QUEUED_LIMIT`` (4096): full blocks
      held per segment beyond those in flight before ``write_event`` blocks;
    * ``linger_s``, ``reconnect_backoff_s``: finite seconds, 0 to ``WRITER_DELAY_S_LIMIT``
      (60);
    * ``reconnect_attempts_max``: int, 1 to ``WRITER_RECONNECT_ATTEMPTS_LIMIT`` (10,000);
    * ``append_call_timeout_s``: finite seconds, above 0 and at most
      ``APPEND_CALL_TIMEOUT_S_LIMIT`` (3,600);
    * ``switch_interval_s``: None (the default: the interpreter's setting is left alone),
      or finite seconds above 0 and at most 1 (``WRITER_SWITCH_INTERVAL_S``, 1 ms, is the
      value measured): while the writer is open, the process's thread switch interval
      (:func:`sys.setswitchinterval`) is at most this, set back when the last such writer
      closes, so that a caller computing between writes does not delay the writer's own
      threads by Python's 5 ms each time (:mod:`pravega_ray.client.switch_interval`, with
      the hazard that keeps it opt-in).
    """

    block_bytes_target: int = constants.APPEND_BLOCK_BYTES_TARGET
    blocks_in_flight_max: int = constants.WRITER_BLOCKS_IN_FLIGHT_MAX
    linger_s: float = constants.WRITER_LINGER_S
    reconnect_attempts_max: int = constants.WRITER_RECONNECT_ATTEMPTS_MAX
    reconnect_backoff_s: float = constants.WRITER_RECONNECT_BACKOFF_S
    append_call_timeout_s: float = constants.APPEND_CALL_TIMEOUT_S
    blocks_queued_max: int = constants.WRITER_BLOCKS_QUEUED_MAX
    switch_interval_s: float | None = None

    def __post_init__(self) -> None:
        c = constants
        _check_int("block_bytes_target", self.block_bytes_target, c.APPEND_BLOCK_BYTES_MAX)
        _check_int(
            "blocks_in_flight_max", self.blocks_in_flight_max, c.WRITER_BLOCKS_IN_FLIGHT_LIMIT
        )
        _check_int("blocks_queued_max", self.blocks_queued_max, c.WRITER_BLOCKS_QUEUED_LIMIT)
        _check_int(
            "reconnect_attempts_max", self.reconnect_attempts_max, c.WRITER_RECONNECT_ATTEMPTS_LIMIT
        )
        _check_seconds("linger_s", self.linger_s, c.WRITER_DELAY_S_LIMIT)
        _check_seconds("reconnect_backoff_s", self.reconnect_backoff_s, c.WRITER_DELAY_S_LIMIT)
        _check_seconds(
            "append_call_timeout_s",
            self.append_call_timeout_s,
            c.APPEND_CALL_TIMEOUT_S_LIMIT,
            positive=True,
        )
        if self.switch_interval_s is not None:
            _check_seconds("switch_interval_s", self.switch_interval_s, 1.0, positive=True)


def check_timeout(name: str, timeout: object) -> float | None:
    """``timeout`` as a float, or None; InvalidArgumentError naming ``name`` unless it is
    None or a finite number of seconds >= 0 (``flush``, ``commit`` and the like)."""
    return None if timeout is None else check_wait(name, timeout)


def _check_int(name: str, value: object, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InvalidArgumentError(
            f"WriterConfig.{name} must be an int in [1, {high}], got {value!r}"
        )


def _check_seconds(name: str, value: object, high: float, *, positive: bool = False) -> None:
    check_seconds(f"WriterConfig.{name}", value, high, positive=positive)
