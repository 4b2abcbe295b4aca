"""The simulation's clock: a :class:`~pravega_ray.timing.ManualClock` whose wall time can jump.

A real machine has two clocks. The monotonic one (intervals, deadlines, timeouts, leases)
never goes back; the wall clock (``wall_time_ms``: times stored with data, such as a
segment's time index and creation time) is set by NTP or an operator, and may jump forward
or back at any moment. :class:`SimClock` keeps ManualClock's monotonic time, moved only by
the simulator, and adds an offset to its wall time that :meth:`SimClock.jump_wall` changes
(the ``clock_jump`` fault): the monotonic clock does not notice.
"""

from __future__ import annotations

from pravega_ray.errors import InvalidArgumentError
from pravega_ray.timing import ManualClock

__all__ = ["SimClock"]


class SimClock(ManualClock):
    """ManualClock plus a wall-clock offset; see the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.wall_offset_ms = 0

    def wall_time_ms(self) -> int:
        """ManualClock's wall time, moved by every jump so far."""
        return super().wall_time_ms() + self.wall_offset_ms

    def jump_wall(self, delta_ms: int) -> None:
        """Move the wall clock by ``delta_ms`` (either way); the monotonic clock stays.

        InvalidArgumentError if ``delta_ms`` is not an int, or would put the wall clock
        before the Unix epoch.
        """
        if isinstance(delta_ms, bool) or not isinstance(delta_ms, int):
            raise InvalidArgumentError(f"delta_ms must be an int, got {delta_ms!r}")
        if self.wall_time_ms() + delta_ms < 0:
            raise InvalidArgumentError(f"a jump of {delta_ms} ms goes before the Unix epoch")
        self.wall_offset_ms += delta_ms
