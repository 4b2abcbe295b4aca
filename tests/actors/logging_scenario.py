"""A tiny program run by tests/actors/test_metrics_export.py in a subprocess: quiet logs.

Calls ``configure_logging`` (verbose with ``-v``), starts or joins Ray (``RAY_ADDRESS``)
as ``start_local`` does (``cluster._init_ray``), makes an actor set up as pravega-ray's
actors are, which logs an INFO and an ERROR line and whose call raises, then raises an
error itself. Quiet, the
terminal shows the program's lines, the actor's ERROR line, the failed call and the
traceback; nothing at INFO.
"""

from __future__ import annotations

import logging
import sys
import time

from pravega_ray.logging_setup import configure_logging


def main() -> None:
    configure_logging("-v" in sys.argv)
    import ray

    from pravega_ray.cluster import _init_ray
    from pravega_ray_actors.ray_metrics import setup_actor_process

    _init_ray(None, "logging-scenario")
    print("[scenario] ray started", flush=True)

    @ray.remote(num_cpus=0)
    class Noisy:
        def __init__(self) -> None:
            setup_actor_process()
            log = logging.getLogger("pravega_ray.scenario")
            log.info("actor info line")
            log.error("actor error line")

        def fail(self) -> None:
            raise ValueError("the actor's call failed")

    actor = Noisy.remote()  # type: ignore[attr-defined]
    try:
        ray.get(actor.fail.remote())
    except ray.exceptions.RayTaskError as e:
        print(f"[scenario] caught {type(e.cause).__name__}", flush=True)
    time.sleep(1.5)  # Ray's log monitor forwards the actor's lines meanwhile
    ray.shutdown()
    raise RuntimeError("the program's own error")


if __name__ == "__main__":
    main()
