"""The chaos suite: the whole system under load while every kind of part is killed.

``make chaos`` (``python -m chaos.run``) starts a 3-node local Ray, SeaweedFS behind a
fault-injecting proxy (:mod:`chaos.s3_proxy`), and ``pr.start_local`` on it; runs the load of
:mod:`chaos.load` while :mod:`chaos.schedule`'s seeded faults are injected; then reads
everything back and checks the invariants of :mod:`chaos.checker`. docs/chaos.md describes it.
"""
